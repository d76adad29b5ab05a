#include "runtime/device_select.h"

#include "runtime/error.h"

namespace liftoff {

#if LIFTOFF_WITH_CUDA
namespace cuda {
std::string unavailable_reason(int index);  // runtime/cuda/availability.cu
std::string describe_device(int index);
std::string device_name(int index);
void set_current_device(int index);
}  // namespace cuda
#endif

void use_device(Device device) {
  if (!device.is_cuda()) return;
#if LIFTOFF_WITH_CUDA
  cuda::set_current_device(device.index);
#endif
}

std::string cuda_unavailable_reason(int index) {
#if LIFTOFF_WITH_CUDA
  return cuda::unavailable_reason(index);
#else
  (void)index;
  return "this Liftoff was built without CUDA (nvcc/cuDNN not found or -DLIFTOFF_CUDA=OFF); rebuild with "
         "-DLIFTOFF_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu";
#endif
}

std::string cuda_device_name(int index) {
#if LIFTOFF_WITH_CUDA
  return cuda::device_name(index);
#else
  (void)index;
  return "";
#endif
}

DeviceChoice resolve_device(const std::string& spec) {
  if (spec == "cpu") return {Device::cpu(), "cpu: requested"};
  if (spec == "auto") {
    const std::string reason = cuda_unavailable_reason(0);
    if (reason.empty()) {
#if LIFTOFF_WITH_CUDA
      return {Device::cuda(0), "auto: CUDA is usable (" + cuda::describe_device(0) + ")"};
#endif
    }
    return {Device::cpu(), "auto: using the CPU because " + reason};
  }
  const Device device = Device::parse(spec);
  const std::string reason = cuda_unavailable_reason(device.index);
  if (!reason.empty()) throw DeviceError("--device " + spec + " cannot be used: " + reason);
#if LIFTOFF_WITH_CUDA
  return {device, spec + ": " + cuda::describe_device(device.index)};
#else
  return {device, spec};
#endif
}

}  // namespace liftoff
