// What the machine and this build offer: driver, CUDA runtime, cuBLAS, cuDNN, NCCL versions (compiled and
// loaded), the paths of the libraries actually mapped, and each GPU. Used by `doctor` and the run report.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace liftoff {

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  uint64_t memory_bytes = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;
  bool build_has_kernels = false;  // this build carries SASS or PTX the GPU can run
  std::string unusable_reason;     // empty when Liftoff's kernels ran on it
};

struct SystemInfo {
  bool built_with_cuda = false;
  std::string compiled_architectures;  // e.g. "75,80,86,89,90"
  int driver_cuda_version = 0;         // highest CUDA version the driver supports (e.g. 13000), 0: no driver
  int runtime_version = 0;             // CUDA runtime compiled in (static)
  int cublas_compiled = 0, cublas_loaded = 0;
  int cudnn_compiled = 0, cudnn_loaded = 0;
  int nccl_loaded = 0;  // 0: not found
  std::string nccl_library;
  std::vector<std::pair<std::string, std::vector<std::string>>> loaded_libraries;  // fragment -> paths
  std::vector<GpuInfo> gpus;
};

SystemInfo query_system_info();
// "13.0" from CUDA's 13000.
std::string cuda_version_str(int version);
// "9.19.0" from cuDNN's 91900, "2.28.9" from NCCL's 22809, "13.1.0" from cuBLAS's 130100.
std::string library_version_str(int version);

}  // namespace liftoff
