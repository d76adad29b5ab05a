#include "ops/loss/front.h"

#include "runtime/autocast.h"

namespace liftoff::loss_front {

Reduction parse_reduction(const char* op, const std::string& name, bool allow_batchmean) {
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  if (name == "none") return Reduction::none;
  if (name == "batchmean" && allow_batchmean) return Reduction::batchmean;
  throw ValueError(str_cat(op, ": reduction '", name, "' is not one of \"mean\", \"sum\", \"none\"",
                           allow_batchmean ? ", \"batchmean\"" : ""));
}

namespace {
int width_rank(DType d) {
  switch (d) {
    case DType::f64:
      return 3;
    case DType::f32:
      return 2;
    default:
      return 1;  // f16, bf16
  }
}
}  // namespace

DType compute_dtype(DType a, DType b) {
  DType out = a;
  if (a != b) out = width_rank(a) >= width_rank(b) ? a : b;
  if (width_rank(a) == 1 && width_rank(b) == 1 && a != b) out = DType::f32;  // f16 + bf16, as PyTorch
  if (width_rank(out) == 1 && autocast_enabled()) out = DType::f32;
  return out;
}

void check_floating(const char* op, const char* what, const Tensor& x) {
  LIFTOFF_CHECK(x.defined(), ValueError, op, ": ", what, " must be a defined tensor");
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, op, ": ", what, " ", shape_str(x.shape()), " has dtype ",
                dtype_name(x.dtype()), ", expected a floating dtype (f32, f64, f16, bf16)");
}

}  // namespace liftoff::loss_front
