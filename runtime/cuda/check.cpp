#include "runtime/cuda/check.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace liftoff::cuda {

int current_device_or_minus_one() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

void throw_backend_error(const char* library, const char* statement, const char* file, int line, long code,
                         const std::string& message) {
  const int device = current_device_or_minus_one();
  const std::string where = device >= 0 ? "cuda:" + std::to_string(device) : "no current device";
  const std::string text = str_cat(library, " error ", code, " (", message, ") in `", statement, "` at ", file, ":",
                                   line, " on ", where);
  if (code == cudaErrorMemoryAllocation && std::string(library) == "CUDA") throw OutOfMemoryError(text);
  throw BackendError(text);
}

std::string cuda_error_string(int code) {
  const auto err = static_cast<cudaError_t>(code);
  std::string text = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorNoKernelImageForDevice) {
    text += "; this binary has no kernels for this GPU's architecture: rebuild with "
            "-DCMAKE_CUDA_ARCHITECTURES=<its compute capability, e.g. 90>";
  }
  return text;
}

std::string cublas_error_string(int code) { return cublasGetStatusString(static_cast<cublasStatus_t>(code)); }

// cuDNN 9 keeps a message per thread saying why the last call failed (e.g. which part of a graph no engine
// supports); it is appended to the status name.
std::string cudnn_error_string(int code) {
  std::string text = cudnnGetErrorString(static_cast<cudnnStatus_t>(code));
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  if (detail[0] != '\0') text += str_cat(": ", detail);
  return text;
}

}  // namespace liftoff::cuda
