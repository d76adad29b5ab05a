#include "runtime/system_info.h"

#include <cstdlib>

#include "runtime/device_select.h"
#include "runtime/platform/dynamic_library.h"
#if LIFTOFF_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#endif

#ifndef LIFTOFF_CUDA_ARCHITECTURES
#define LIFTOFF_CUDA_ARCHITECTURES ""
#endif

namespace liftoff {

std::string cuda_version_str(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
std::string library_version_str(int v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

#if LIFTOFF_WITH_CUDA
namespace {
// Does the build carry code this compute capability can run (same-major SASS at or below it, or older PTX)?
bool build_has_kernels_for(const std::string& archs, int major, int minor) {
  const int cc = major * 10 + minor;
  size_t pos = 0;
  while (pos < archs.size()) {
    size_t end = archs.find(',', pos);
    if (end == std::string::npos) end = archs.size();
    const std::string item = archs.substr(pos, end - pos);
    pos = end + 1;
    const int a = std::atoi(item.c_str());
    if (a > 0 && a <= cc && a / 10 == major) return true;
  }
  return false;
}
}  // namespace
#endif

SystemInfo query_system_info() {
  SystemInfo info;
  info.built_with_cuda = built_with_cuda();
  info.compiled_architectures = LIFTOFF_CUDA_ARCHITECTURES;
  {
    platform::DynamicLibrary nccl({"libnccl.so.2", "libnccl.so"});
    using GetVersion = int (*)(int*);
    if (auto fn = reinterpret_cast<GetVersion>(nccl.symbol("ncclGetVersion"))) {
      int v = 0;
      if (fn(&v) == 0) info.nccl_loaded = v;
      info.nccl_library = nccl.name();
    }
  }
#if LIFTOFF_WITH_CUDA
  cudaDriverGetVersion(&info.driver_cuda_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  info.cublas_compiled = CUBLAS_VERSION;
  {
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
      info.cublas_loaded = major * 10000 + minor * 100 + patch;
    }
  }
  info.cudnn_compiled = CUDNN_VERSION;
  info.cudnn_loaded = static_cast<int>(cudnnGetVersion());
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.cc_major = prop.major;
    g.cc_minor = prop.minor;
    g.memory_bytes = prop.totalGlobalMem;
    g.multiprocessors = prop.multiProcessorCount;
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) g.pci_bus_id = bus;
    g.build_has_kernels = build_has_kernels_for(info.compiled_architectures, prop.major, prop.minor);
    g.unusable_reason = cuda_unavailable_reason(i);
    info.gpus.push_back(g);
  }
#endif
  for (const char* fragment :
       {"libcuda.so", "libcudart", "libcublas", "libcudnn", "libnccl", "libnvidia-ml"}) {
    info.loaded_libraries.emplace_back(fragment, platform::loaded_library_paths(fragment));
  }
  return info;
}

}  // namespace liftoff
