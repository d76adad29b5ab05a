#include "ops/cast/cast.h"

#include "runtime/autograd.h"

namespace liftoff {

// No kernels of its own: Tensor::to() already converts every dtype pair on the CPU and on CUDA.
Tensor cast(const Tensor& x, DType dtype) {
  LIFTOFF_CHECK(x.defined(), ValueError, "cast: input is an undefined tensor");
  if (x.dtype() == dtype) return x;
  Tensor y = x.detach().to(dtype);
  if (is_floating(dtype) && should_record({x})) {
    record(y, "cast", {x}, [source = x.dtype()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{gy.to(source)};
    });
  }
  return y;
}

}  // namespace liftoff
