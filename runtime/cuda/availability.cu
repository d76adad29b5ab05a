// Probes whether a CUDA device can run this build's kernels, and says why not in one actionable line.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_loader.h"
#include "runtime/error.h"

namespace liftoff::cuda {

namespace {
__global__ void probe_kernel(int* out) { *out = 42; }

std::string version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
}  // namespace

std::string describe_device(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:" + std::to_string(index);
  }
  return str_cat(prop.name, ", sm_", prop.major, prop.minor, ", ", prop.totalGlobalMem >> 30, " GiB");
}

std::string unavailable_reason(int index) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0) {
    return "no NVIDIA driver found (libcuda.so.1 could not be loaded); install the NVIDIA driver, or use "
           "--device cpu";
  }
  if (driver < runtime) {
    return "the NVIDIA driver supports CUDA up to " + version_str(driver) + " but this build uses CUDA " +
           version_str(runtime) + "; update the driver or rebuild with an older CUDA toolkit";
  }
  int count = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&count);
  if (count_err != cudaSuccess || count == 0) {
    const std::string detail = count_err != cudaSuccess ? std::string(" (") + cudaGetErrorString(count_err) + ")" : "";
    cudaGetLastError();
    return "no CUDA device is visible" + detail + "; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu";
  }
  if (index < 0 || index >= count) {
    return "cuda:" + std::to_string(index) + " does not exist: this machine has " + std::to_string(count) +
           " CUDA device(s), cuda:0.." + "cuda:" + std::to_string(count - 1);
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:" + std::to_string(index) + " cannot be queried";
  }
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(index);
  int* flag = nullptr;
  std::string reason;
  if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) {
    reason = std::string("cuda:") + std::to_string(index) + " cannot allocate memory: " +
             cudaGetErrorString(cudaGetLastError());
  } else {
    probe_kernel<<<1, 1>>>(flag);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
      reason = str_cat("this build has no kernels for ", prop.name, " (sm_", prop.major, prop.minor,
                       "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=", prop.major, prop.minor);
    } else if (err != cudaSuccess) {
      reason = std::string("a test kernel failed on cuda:") + std::to_string(index) + ": " + cudaGetErrorString(err);
    }
    cudaGetLastError();
    cudaFree(flag);
  }
  cudaSetDevice(previous);
  if (!reason.empty()) return reason;
  if (!cudnn_loaded()) return cudnn_load_error();
  const size_t cudnn_version = cudnnGetVersion();
  if (cudnn_version / 10000 != CUDNN_MAJOR) {
    return str_cat("cuDNN ", cudnn_version, " is loaded but this build needs cuDNN ", CUDNN_MAJOR,
                   ".x; install cuDNN ", CUDNN_MAJOR, " or point LD_LIBRARY_PATH at it");
  }
  return "";
}

void set_current_device(int index) {
  LIFTOFF_CUDA_CHECK(cudaSetDevice(index));
}

}  // namespace liftoff::cuda
