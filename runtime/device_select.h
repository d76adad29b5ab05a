// Turns a --device flag into a usable Device, or a one-line reason with a fix.
#pragma once
#include <string>

#include "runtime/device.h"

namespace liftoff {

struct DeviceChoice {
  Device device;
  std::string why;  // e.g. "auto: CUDA is usable (NVIDIA H200, sm_90)" or "auto: no CUDA device (...)"
};

// Empty when cuda:index can run Liftoff's kernels; otherwise why not and what to do (built without CUDA, no
// driver, driver older than the runtime, no device, index out of range, no kernel image for the GPU,
// cuDNN major version differs from the one compiled against).
std::string cuda_unavailable_reason(int index = 0);

// The GPU's product name ("NVIDIA H200"), empty when it cannot be read or the build has no CUDA.
std::string cuda_device_name(int index);

// "auto" picks cuda:0 when usable, else the CPU (saying why); "cpu"; "cuda" / "cuda:N" throw DeviceError with
// the reason when unusable.
DeviceChoice resolve_device(const std::string& spec);

// Makes a CUDA device the calling thread's current device for good (PyTorch's torch.cuda.set_device): a
// process that owns one GPU (a DDP rank on cuda:N) then creates every handle and event there. No-op for cpu.
void use_device(Device device);

}  // namespace liftoff
