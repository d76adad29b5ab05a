#include "ops/avg_pool2d/avg_pool2d.h"

#include "ops/avg_pool2d/kernels.h"
#include "ops/common/layout.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor avg_pool2d(const Tensor& input, int64_t kernel, int64_t stride, int64_t padding) {
  AvgPool2dShape g = check_pool_window("avg_pool2d", input, kernel, stride, padding);
  // A channels-last CUDA input stays channels-last (output and input gradient).
  const MemoryFormat format = op_memory_format(input);
  g.channels_last = format == MemoryFormat::channels_last;
  const Tensor x = input.contiguous(format);
  Tensor y = Tensor::empty({g.n, g.c, g.oh, g.ow}, x.dtype(), x.device(), format);
  LIFTOFF_DISPATCH(x.device(), avg_pool2d_forward, x, y, g);
  // Record against the caller's tensor: contiguous() of a strided input is a raw copy without grad edges.
  if (should_record({input})) {
    record(y, "avg_pool2d", {input}, [g, format, dtype = x.dtype()](const Tensor& gy_in, const NeedsGrad&) {
      LIFTOFF_CHECK(gy_in.shape() == Shape({g.n, g.c, g.oh, g.ow}) && gy_in.dtype() == dtype, ShapeError,
                    "avg_pool2d backward: gradient ", shape_str(gy_in.shape()), " ",
                    dtype_name(gy_in.dtype()), " does not match the output [", g.n, ", ", g.c, ", ", g.oh,
                    ", ", g.ow, "] ", dtype_name(dtype));
      const Tensor gy = gy_in.contiguous(format);
      Tensor gx = Tensor::empty({g.n, g.c, g.h, g.w}, dtype, gy.device(), format);
      LIFTOFF_DISPATCH(gy.device(), avg_pool2d_backward, gy, gx, g);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
