#include "ops/common/pool_window.h"

namespace liftoff {

PoolWindow check_pool_window(const char* op, const Tensor& x, int64_t kernel, int64_t stride,
                             int64_t padding) {
  LIFTOFF_CHECK(x.defined(), ValueError, op, ": the input tensor is undefined");
  LIFTOFF_CHECK(x.dim() == 4, ShapeError, op, ": expected a 4-D input [N, C, H, W], got ",
                shape_str(x.shape()));
  const Shape& xs = x.shape();
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, op, ": input ", shape_str(xs), " has dtype ",
                dtype_name(x.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(kernel >= 1, ValueError, op, ": kernel size must be positive, got ", kernel, " (input ",
                shape_str(xs), ")");
  LIFTOFF_CHECK(stride >= 1, ValueError, op, ": stride must be positive, got ", stride, " (input ",
                shape_str(xs), ")");
  LIFTOFF_CHECK(padding >= 0 && padding <= kernel / 2, ValueError, op, ": padding ", padding,
                " must be between 0 and half the kernel size ", kernel, " (input ", shape_str(xs), ")");
  LIFTOFF_CHECK(xs[2] >= 1 && xs[3] >= 1, ShapeError, op, ": input ", shape_str(xs),
                " must have a positive height and width");
  const int64_t span_h = xs[2] + 2 * padding - kernel;
  const int64_t span_w = xs[3] + 2 * padding - kernel;
  LIFTOFF_CHECK(span_h >= 0 && span_w >= 0, ShapeError, op, ": input ", shape_str(xs), " with padding ",
                padding, " is smaller than the ", kernel, "x", kernel, " window; the output would be empty");
  return PoolWindow{xs[0],  xs[1],  xs[2],   xs[3], span_h / stride + 1, span_w / stride + 1,
                    kernel, stride, padding, false};
}

}  // namespace liftoff
