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
}  // namespace liftoff::testing
