#include "ops/pad/pad.h"

#include "ops/common/layout.h"
#include "ops/common/remap.h"
#include "ops/pad/kernels.h"
#include "ops/pad/pad_backward.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
RemapKind kind_of(const std::string& mode, const Shape& x_shape) {
  if (mode == "constant") return RemapKind::pad_constant;
  if (mode == "reflect") return RemapKind::pad_reflect;
  if (mode == "replicate") return RemapKind::pad_replicate;
  throw ValueError(str_cat("pad: mode '", mode, "' is not supported (constant, reflect, replicate); input ",
                           shape_str(x_shape)));
}

std::vector<int64_t> negated(const std::vector<int64_t>& pads) {
  std::vector<int64_t> out;
  for (int64_t p : pads) out.push_back(-p);
  return out;
}
}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  LIFTOFF_CHECK(x.defined(), ValueError, "pad: input is an undefined tensor");
  const RemapKind kind = kind_of(mode, x.shape());
  const int padded = static_cast<int>(pads.size() / 2);
  LIFTOFF_CHECK(pads.size() % 2 == 0 && padded <= x.dim(), ShapeError, "pad: pads ", shape_str(pads),
                " must be (left, right) pairs for at most the ", x.dim(), " dims of input ",
                shape_str(x.shape()));
  LIFTOFF_CHECK(kind == RemapKind::pad_constant || padded <= kMaxPadBackwardDims, ShapeError, "pad: ", mode,
                " mode pads at most the last ", kMaxPadBackwardDims, " dims; got pads ", shape_str(pads),
                " for input ", shape_str(x.shape()));
  Shape out_shape = x.shape();
  RemapPlan plan;
  for (int j = 0; j < padded; ++j) {
    const int64_t d = x.dim() - 1 - j;
    const int64_t l = pads[2 * j], r = pads[2 * j + 1];
    const int64_t n = x.shape()[d];
    out_shape[d] = n + l + r;
    LIFTOFF_CHECK(out_shape[d] >= 0, ShapeError, "pad: pads ", shape_str(pads), " shrink dim ", d,
                  " of input ", shape_str(x.shape()), " below size 0");
    if (kind != RemapKind::pad_constant) {
      LIFTOFF_CHECK(l >= 0 && r >= 0, ShapeError, "pad: ", mode, " mode needs pads >= 0, got ",
                    shape_str(pads), " for input ", shape_str(x.shape()));
    }
    if (kind == RemapKind::pad_reflect) {
      LIFTOFF_CHECK(l < n && r < n, ShapeError, "pad: reflect pads ", shape_str(pads),
                    " must be smaller than", " the padded dim (size ", n, " of input ", shape_str(x.shape()),
                    ")");
    }
    if (kind == RemapKind::pad_replicate) {
      LIFTOFF_CHECK(n > 0 || (l == 0 && r == 0), ShapeError, "pad: replicate cannot pad the empty dim ", d,
                    " of input ", shape_str(x.shape()));
    }
    plan.dims[d] = {kind, l};
  }
  strided_of(out_shape, contiguous_strides(out_shape), "pad");
  const Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), op_memory_format(x));
  remap_into(x, out, plan, value);
  if (should_record({x})) {
    record(out, "pad", {x},
           [pads, kind, plan, padded, x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
             if (kind == RemapKind::pad_constant) return std::vector<Tensor>{pad(gy, negated(pads))};
             const Tensor gx = Tensor::empty(x_shape, gy.dtype(), gy.device());
             if (gx.numel() > 0) LIFTOFF_DISPATCH(gy.device(), pad_backward, gy, plan, padded, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return out;
}

}  // namespace liftoff
