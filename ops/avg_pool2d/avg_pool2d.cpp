#include "ops/avg_pool2d/avg_pool2d.h"

#include "ops/avg_pool2d/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
AvgPool2dShape check_avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  LIFTOFF_CHECK(x.defined(), ValueError, "avg_pool2d: the input tensor is undefined");
  LIFTOFF_CHECK(x.dim() == 4, ShapeError, "avg_pool2d: expected a 4-D input [N, C, H, W], got ",
                shape_str(x.shape()));
  const Shape& xs = x.shape();
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, "avg_pool2d: input ", shape_str(xs), " has dtype ",
                dtype_name(x.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(kernel >= 1, ValueError, "avg_pool2d: kernel size must be positive, got ", kernel, " (input ",
                shape_str(xs), ")");
  LIFTOFF_CHECK(stride >= 1, ValueError, "avg_pool2d: stride must be positive, got ", stride, " (input ",
                shape_str(xs), ")");
  LIFTOFF_CHECK(padding >= 0 && padding <= kernel / 2, ValueError, "avg_pool2d: padding ", padding,
                " must be between 0 and half the kernel size ", kernel, " (input ", shape_str(xs), ")");
  LIFTOFF_CHECK(xs[2] >= 1 && xs[3] >= 1, ShapeError, "avg_pool2d: input ", shape_str(xs),
                " must have a positive height and width");
  const int64_t span_h = xs[2] + 2 * padding - kernel;
  const int64_t span_w = xs[3] + 2 * padding - kernel;
  LIFTOFF_CHECK(span_h >= 0 && span_w >= 0, ShapeError, "avg_pool2d: input ", shape_str(xs), " with padding ",
                padding, " is smaller than the ", kernel, "x", kernel, " window; the output would be empty");
  return AvgPool2dShape{xs[0],  xs[1],  xs[2],  xs[3], span_h / stride + 1, span_w / stride + 1,
                        kernel, stride, padding};
}
}  // namespace

Tensor avg_pool2d(const Tensor& input, int64_t kernel, int64_t stride, int64_t padding) {
  const AvgPool2dShape g = check_avg_pool2d(input, kernel, stride, padding);
  const Tensor x = input.contiguous();
  Tensor y = Tensor::empty({g.n, g.c, g.oh, g.ow}, x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), avg_pool2d_forward, x, y, g);
  // Record against the caller's tensor: contiguous() of a strided input is a raw copy without grad edges.
  if (should_record({input})) {
    record(y, "avg_pool2d", {input}, [g, dtype = x.dtype()](const Tensor& gy_in, const NeedsGrad&) {
      LIFTOFF_CHECK(gy_in.shape() == Shape({g.n, g.c, g.oh, g.ow}) && gy_in.dtype() == dtype, ShapeError,
                    "avg_pool2d backward: gradient ", shape_str(gy_in.shape()), " ",
                    dtype_name(gy_in.dtype()), " does not match the output [", g.n, ", ", g.c, ", ", g.oh,
                    ", ", g.ow, "] ", dtype_name(dtype));
      const Tensor gy = gy_in.contiguous();
      Tensor gx = Tensor::empty({g.n, g.c, g.h, g.w}, dtype, gy.device());
      LIFTOFF_DISPATCH(gy.device(), avg_pool2d_backward, gy, gx, g);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
