#include "tests/common/cuda_test.h"

#include "runtime/device.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/context.h"
#endif

namespace liftoff::testing {
std::string cuda_unavailable_reason() {
#if LIFTOFF_WITH_CUDA
  if (cuda::device_count() == 0) return "no CUDA device or driver on this machine";
  return "";
#else
  return "this build has no CUDA backend (-DLIFTOFF_CUDA=OFF or nvcc not found)";
#endif
}

Tensor channels_last_view(const Tensor& t, DType dtype, int64_t offset) {
  const Shape& s = t.shape();
  const int64_t numel = t.numel();
  const Tensor storage = Tensor::empty({numel + offset}, dtype, Device::cuda(0));
  const Tensor nhwc = storage.slice(0, offset, numel + offset).view({s[0], s[2], s[3], s[1]});
  nhwc.copy_(t.permute({0, 2, 3, 1}).contiguous());
  return nhwc.permute({0, 3, 1, 2});
}
}  // namespace liftoff::testing
