#include "ops/cast/cast.h"

#include "ops/common/layout.h"
#include "runtime/autograd.h"

namespace liftoff {

// No kernels of its own: Tensor::to() already converts every dtype pair on the CPU and on CUDA.
Tensor cast(const Tensor& x, DType dtype) {
  LIFTOFF_CHECK(x.defined(), ValueError, "cast: input is an undefined tensor");
  if (x.dtype() == dtype) return x;
  // A channels-last CUDA tensor stays channels-last (a linear conversion over the storage), in both
  // directions.
  const MemoryFormat format = op_memory_format(x);
  Tensor y = Tensor::empty(x.shape(), dtype, x.device(), format);
  y.copy_(x.detach());
  if (is_floating(dtype) && should_record({x})) {
    record(y, "cast", {x}, [source = x.dtype(), format](const Tensor& gy, const NeedsGrad&) {
      Tensor gx = Tensor::empty(gy.shape(), source, gy.device(), format);
      gx.copy_(gy);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
