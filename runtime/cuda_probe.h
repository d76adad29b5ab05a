// What a CUDA availability probe found, as plain data, and the one-line reason it turns into. Kept apart from
// the CUDA calls (runtime/cuda/availability.cu fills the probe) so that every reason can be tested on
// machines without the failure: an old driver, no device, a build without kernels for the GPU, a missing
// cuDNN or cuBLAS.
#pragma once
#include <string>

namespace liftoff {

struct CudaProbe {
  int driver_version = 0;   // cudaDriverGetVersion (0: no driver)
  int runtime_version = 0;  // cudaRuntimeGetVersion, e.g. 13000
  int device_count = 0;
  std::string count_error;  // cudaGetDeviceCount's error text; empty when it succeeded
  int index = 0;            // the device asked for
  bool properties_ok = true;
  std::string name;  // e.g. "NVIDIA H200"
  int major = 0, minor = 0;
  std::string alloc_error;       // a 4-byte cudaMalloc on the device failed with this text
  bool no_kernel_image = false;  // the probe kernel found no image for this GPU
  std::string kernel_error;      // any other launch / run error of the probe kernel
  bool cudnn_loaded = true;
  std::string cudnn_load_error;  // why it could not be loaded (when !cudnn_loaded)
  int cudnn_version = 0;         // cudnnGetVersion, e.g. 91900
  int cudnn_compiled_major = 0;  // CUDNN_MAJOR of the build
  bool cublas_loaded = true;
  std::string cublas_load_error;  // why it could not be loaded (when !cublas_loaded)
};

// Empty when the probe says the device can run Liftoff; otherwise what is wrong and what to do.
std::string explain_cuda_probe(const CudaProbe& probe);

}  // namespace liftoff
