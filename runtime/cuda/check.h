// One check macro family for every CUDA, cuBLAS, cuDNN and NCCL call: a failure throws BackendError naming
// the statement, file:line, the current device and the library's own error string.
#pragma once
#include <string>

#include "runtime/error.h"

namespace liftoff::cuda {

int current_device_or_minus_one();
[[noreturn]] void throw_backend_error(const char* library, const char* statement, const char* file, int line,
                                      long code, const std::string& message);
// Converts a status code of each library to a readable string (defined where the library is linked).
std::string cuda_error_string(int code);
std::string cublas_error_string(int code);
std::string cudnn_error_string(int code);
// NCCL's status string plus its last error message (runtime/distributed/nccl_group.cpp, NCCL builds only).
std::string nccl_error_string(int code);

}  // namespace liftoff::cuda

#define LIFTOFF_CUDA_CHECK(stmt)                                                                            \
  do {                                                                                                      \
    const auto liftoff_status_ = (stmt);                                                                    \
    if (liftoff_status_ != 0)                                                                               \
      ::liftoff::cuda::throw_backend_error("CUDA", #stmt, __FILE__, __LINE__, static_cast<long>(liftoff_status_), \
                                           ::liftoff::cuda::cuda_error_string(static_cast<int>(liftoff_status_))); \
  } while (0)

#define LIFTOFF_CUBLAS_CHECK(stmt)                                                                          \
  do {                                                                                                      \
    const auto liftoff_status_ = (stmt);                                                                    \
    if (liftoff_status_ != 0)                                                                               \
      ::liftoff::cuda::throw_backend_error("cuBLAS", #stmt, __FILE__, __LINE__,                             \
                                           static_cast<long>(liftoff_status_),                              \
                                           ::liftoff::cuda::cublas_error_string(static_cast<int>(liftoff_status_))); \
  } while (0)

#define LIFTOFF_CUDNN_CHECK(stmt)                                                                           \
  do {                                                                                                      \
    const auto liftoff_status_ = (stmt);                                                                    \
    if (liftoff_status_ != 0)                                                                               \
      ::liftoff::cuda::throw_backend_error("cuDNN", #stmt, __FILE__, __LINE__,                              \
                                           static_cast<long>(liftoff_status_),                              \
                                           ::liftoff::cuda::cudnn_error_string(static_cast<int>(liftoff_status_))); \
  } while (0)

// ncclInProgress (7) is not an error: non-blocking communicators return it while an operation is being enqueued.
#define LIFTOFF_NCCL_CHECK(stmt)                                                                            \
  do {                                                                                                      \
    const auto liftoff_status_ = (stmt);                                                                    \
    if (liftoff_status_ != 0 && static_cast<int>(liftoff_status_) != 7)                                    \
      ::liftoff::cuda::throw_backend_error("NCCL", #stmt, __FILE__, __LINE__, static_cast<long>(liftoff_status_), \
                                           ::liftoff::cuda::nccl_error_string(static_cast<int>(liftoff_status_))); \
  } while (0)

// After every kernel launch: catches bad launch configurations and missing kernel images at the launch site.
#define LIFTOFF_LAUNCH_CHECK() LIFTOFF_CUDA_CHECK(cudaGetLastError())
