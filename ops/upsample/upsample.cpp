#include "ops/upsample/upsample.h"

#include <cmath>

#include "ops/common/layout.h"
#include "ops/upsample/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
// PyTorch's area_pixel_compute_scale / compute_scales_value, evaluated in the kernels' type A.
template <class A>
double coordinate_scale(bool bilinear, bool align_corners, int64_t in, int64_t out, double scale_factor) {
  if (bilinear && align_corners) {
    return out > 1 ? static_cast<double>(static_cast<A>(in - 1) / static_cast<A>(out - 1)) : 0.0;
  }
  return scale_factor > 0.0 ? static_cast<double>(static_cast<A>(1.0 / scale_factor))
                            : static_cast<double>(static_cast<A>(in) / static_cast<A>(out));
}

// {v} or {v_h, v_w} -> two values; ValueError otherwise.
template <class V>
void two_values(const std::vector<V>& v, const char* what, const Tensor& x, V* h, V* w) {
  LIFTOFF_CHECK(v.size() == 1 || v.size() == 2, ValueError, "interpolate: ", what,
                " needs 1 or 2 values for input ", shape_str(x.shape()), ", got ", v.size());
  *h = v[0];
  *w = v.back();
}
}  // namespace

Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size,
                   const std::vector<double>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners) {
  LIFTOFF_CHECK(input.defined(), ValueError, "interpolate: the input tensor is undefined");
  LIFTOFF_CHECK(input.dim() == 4, ShapeError, "interpolate: expected a 4-D input [N, C, H, W], got ",
                shape_str(input.shape()));
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "interpolate: input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(mode == "nearest" || mode == "bilinear", ValueError, "interpolate: mode '", mode,
                "' is not supported (\"nearest\", \"bilinear\")");
  const bool bilinear = mode == "bilinear";
  LIFTOFF_CHECK(bilinear || !align_corners.has_value(), ValueError,
                "interpolate: align_corners can only be set with mode \"bilinear\"");
  LIFTOFF_CHECK(size.empty() != scale_factor.empty(), ValueError,
                "interpolate: give exactly one of size and scale_factor (input ", shape_str(input.shape()),
                ")");
  LIFTOFF_CHECK(input.size(2) >= 1 && input.size(3) >= 1, ShapeError, "interpolate: input ",
                shape_str(input.shape()), " must have a positive height and width");
  UpsampleArgs a;
  a.n = input.size(0);
  a.c = input.size(1);
  a.h = input.size(2);
  a.w = input.size(3);
  a.bilinear = bilinear;
  a.align_corners = align_corners.value_or(false);
  double sh = 0.0, sw = 0.0;  // 0: no scale_factor
  if (!size.empty()) {
    two_values(size, "size", input, &a.oh, &a.ow);
  } else {
    two_values(scale_factor, "scale_factor", input, &sh, &sw);
    LIFTOFF_CHECK(sh > 0.0 && sw > 0.0, ValueError, "interpolate: scale_factor must be > 0, got ", sh, ", ",
                  sw);
    a.oh = static_cast<int64_t>(std::floor(static_cast<double>(a.h) * sh));
    a.ow = static_cast<int64_t>(std::floor(static_cast<double>(a.w) * sw));
  }
  LIFTOFF_CHECK(a.oh >= 1 && a.ow >= 1, ShapeError, "interpolate: output size [", a.oh, ", ", a.ow,
                "] for input ", shape_str(input.shape()), " must be positive");
  const bool in_double = bilinear && input.dtype() == DType::f64;
  a.scale_h = in_double ? coordinate_scale<double>(bilinear, a.align_corners, a.h, a.oh, sh)
                        : coordinate_scale<float>(bilinear, a.align_corners, a.h, a.oh, sh);
  a.scale_w = in_double ? coordinate_scale<double>(bilinear, a.align_corners, a.w, a.ow, sw)
                        : coordinate_scale<float>(bilinear, a.align_corners, a.w, a.ow, sw);
  const MemoryFormat format = op_memory_format(input);
  a.channels_last = format == MemoryFormat::channels_last;
  const Tensor x = input.contiguous(format);
  Tensor y = Tensor::empty({a.n, a.c, a.oh, a.ow}, x.dtype(), x.device(), format);
  LIFTOFF_DISPATCH(x.device(), upsample_forward, a, x, y);
  if (should_record({x})) {
    record(y, bilinear ? "upsample_bilinear2d" : "upsample_nearest2d", {x},
           [a, dtype = x.dtype(), format](const Tensor& gy_in, const NeedsGrad&) {
             const Tensor gy = gy_in.to(dtype).contiguous(format);
             Tensor gx = Tensor::empty({a.n, a.c, a.h, a.w}, dtype, gy.device(), format);
             LIFTOFF_DISPATCH(gy.device(), upsample_backward, a, gy, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return y;
}

}  // namespace liftoff
