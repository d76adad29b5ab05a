#include "ops/ema/ema.h"

#include "ops/ema/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

// Pairs of the same shape, dtype (f32 or f64, one for all) and device (one for all), both dense in one
// layout.
void check_pairs(const char* op, const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  LIFTOFF_CHECK(a.size() == b.size(), ValueError, op, ": ", a.size(), " tensors against ", b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    LIFTOFF_CHECK(a[i].defined() && b[i].defined(), ValueError, op, ": entry ", i, " is undefined");
    LIFTOFF_CHECK(a[i].shape() == b[i].shape(), ShapeError, op, ": entry ", i, ": ", describe(a[i]), " vs ",
                  describe(b[i]));
    LIFTOFF_CHECK(a[i].dtype() == b[i].dtype() &&
                      (a[i].dtype() == DType::f32 || a[i].dtype() == DType::f64) &&
                      a[i].dtype() == a[0].dtype(),
                  DTypeError, op, ": entry ", i, ": ", describe(a[i]), " vs ", describe(b[i]),
                  "; every entry must be f32 or f64, one dtype for all (entry 0 is ", describe(a[0]), ")");
    LIFTOFF_CHECK(a[i].device() == b[i].device() && a[i].device() == a[0].device(), DeviceError, op,
                  ": entry ", i, ": ", describe(a[i]), " vs ", describe(b[i]), "; entry 0 is on ",
                  a[0].device().str(), " (one device for all)");
    LIFTOFF_CHECK(same_dense_order(a[i], b[i]), ValueError, op, ": entry ", i, ": ", describe(a[i]), " and ",
                  describe(b[i]), " must both be dense in one layout (updated in place, element by element)");
  }
}
}  // namespace

void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay) {
  LIFTOFF_CHECK(decay >= 0.0 && decay <= 1.0, ValueError, "ema_update: decay ", decay, " must lie in [0, 1]");
  check_pairs("ema_update", averaged, current);
  if (averaged.empty()) return;
  LIFTOFF_DISPATCH(averaged[0].device(), ema_update, averaged, current, decay);
}

void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  check_pairs("swap_contents", a, b);
  if (a.empty()) return;
  LIFTOFF_DISPATCH(a[0].device(), swap_contents, a, b);
}

}  // namespace liftoff
