#include "runtime/device.h"

#include <cstdlib>

#include "runtime/error.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/context.h"
#endif

namespace liftoff {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Device Device::parse(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string digits = text.substr(5);
    char* end = nullptr;
    const long index = std::strtol(digits.c_str(), &end, 10);
    if (!digits.empty() && *end == '\0' && index >= 0 && index < 1024) return Device::cuda(static_cast<int>(index));
  }
  throw ValueError("unknown device '" + text + "'; expected cpu, cuda or cuda:N");
}

bool built_with_cuda() {
#if LIFTOFF_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void synchronize(Device device) {
#if LIFTOFF_WITH_CUDA
  if (device.is_cuda()) cuda::synchronize(device.index);
#else
  (void)device;
#endif
}

}  // namespace liftoff
