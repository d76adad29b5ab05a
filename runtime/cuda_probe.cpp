#include "runtime/cuda_probe.h"

#include "runtime/error.h"

namespace liftoff {

namespace {
std::string version_str(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

std::string explain_cuda_probe(const CudaProbe& p) {
  if (p.driver_version == 0) {
    return "no NVIDIA driver found (libcuda.so.1 could not be loaded); install the NVIDIA driver, or use "
           "--device cpu";
  }
  if (p.driver_version < p.runtime_version) {
    return "the NVIDIA driver supports CUDA up to " + version_str(p.driver_version) +
           " but this build uses CUDA " + version_str(p.runtime_version) +
           "; update the driver or rebuild with an older CUDA toolkit";
  }
  if (!p.count_error.empty() || p.device_count == 0) {
    const std::string detail = p.count_error.empty() ? "" : " (" + p.count_error + ")";
    return "no CUDA device is visible" + detail +
           "; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu";
  }
  if (p.index < 0 || p.index >= p.device_count) {
    return str_cat("cuda:", p.index, " does not exist: this machine has ", p.device_count,
                   " CUDA device(s), cuda:0..cuda:", p.device_count - 1);
  }
  if (!p.properties_ok) return str_cat("cuda:", p.index, " cannot be queried");
  if (!p.alloc_error.empty()) return str_cat("cuda:", p.index, " cannot allocate memory: ", p.alloc_error);
  if (p.no_kernel_image) {
    return str_cat("this build has no kernels for ", p.name, " (sm_", p.major, p.minor,
                   "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=", p.major, p.minor);
  }
  if (!p.kernel_error.empty()) return str_cat("a test kernel failed on cuda:", p.index, ": ", p.kernel_error);
  if (!p.cublas_loaded) return p.cublas_load_error;
  if (!p.cudnn_loaded) return p.cudnn_load_error;
  if (p.cudnn_version / 10000 != p.cudnn_compiled_major) {
    return str_cat("cuDNN ", p.cudnn_version, " is loaded but this build needs cuDNN ",
                   p.cudnn_compiled_major, ".x; install cuDNN ", p.cudnn_compiled_major,
                   " or point LD_LIBRARY_PATH at it");
  }
  return "";
}

}  // namespace liftoff
