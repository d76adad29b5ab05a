// Probes whether a CUDA device can run this build's kernels, and says why not in one actionable line.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cublas_loader.h"
#include "runtime/cuda/cudnn_loader.h"
#include "runtime/cuda_probe.h"
#include "runtime/error.h"

namespace liftoff::cuda {

namespace {
__global__ void probe_kernel(int* out) {
  *out = 42;
}

}  // namespace

std::string describe_device(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:" + std::to_string(index);
  }
  return str_cat(prop.name, ", sm_", prop.major, prop.minor, ", ", prop.totalGlobalMem >> 30, " GiB");
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return prop.name;
}

std::string unavailable_reason(int index) {
  CudaProbe p;
  p.index = index;
  cudaDriverGetVersion(&p.driver_version);
  cudaRuntimeGetVersion(&p.runtime_version);
  if (p.driver_version == 0 || p.driver_version < p.runtime_version) return explain_cuda_probe(p);
  const cudaError_t count_err = cudaGetDeviceCount(&p.device_count);
  if (count_err != cudaSuccess) {
    p.count_error = cudaGetErrorString(count_err);
    cudaGetLastError();
  }
  if (!p.count_error.empty() || index < 0 || index >= p.device_count) return explain_cuda_probe(p);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    p.properties_ok = false;
    return explain_cuda_probe(p);
  }
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(index);
  int* flag = nullptr;
  if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) {
    p.alloc_error = cudaGetErrorString(cudaGetLastError());
  } else {
    probe_kernel<<<1, 1>>>(flag);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
      p.no_kernel_image = true;
    } else if (err != cudaSuccess) {
      p.kernel_error = cudaGetErrorString(err);
    }
    cudaGetLastError();
    cudaFree(flag);
  }
  cudaSetDevice(previous);
  p.cublas_loaded = cublas_loaded();
  if (!p.cublas_loaded) p.cublas_load_error = cublas_load_error();
  p.cudnn_loaded = cudnn_loaded();
  if (!p.cudnn_loaded) {
    p.cudnn_load_error = cudnn_load_error();
  } else {
    p.cudnn_version = static_cast<int>(cudnnGetVersion());
  }
  p.cudnn_compiled_major = CUDNN_MAJOR;
  return explain_cuda_probe(p);
}

void set_current_device(int index) {
  LIFTOFF_CUDA_CHECK(cudaSetDevice(index));
}

}  // namespace liftoff::cuda
