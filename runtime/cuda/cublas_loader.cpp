// cuBLAS is loaded at run time (dlopen) rather than linked, like cuDNN (cudnn_loader.cpp): the installed
// libliftoff.so then has no libcublas NEEDED entry, so a program that embeds Liftoff starts on a machine
// without the CUDA toolkit, and `--device cuda` there says what to install. Each cuBLAS function Liftoff
// calls is defined here with the header's signature (cublas_v2.h names some *_v2) and forwards to the
// library.
#include <cublas_v2.h>

#include <string>

#include "runtime/config.h"
#include "runtime/cuda/cublas_loader.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::cuda {

namespace {
platform::RuntimeLibrary& cublas_library() {
  static auto* lib = new platform::RuntimeLibrary(
      {"cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + " (libcublas.so." + std::to_string(CUBLAS_VER_MAJOR) +
           ")",
       {"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"},
       "install the CUDA toolkit's cuBLAS (NVIDIA package libcublas-" + std::to_string(CUBLAS_VER_MAJOR) +
           "-0) or add its lib folder to LD_LIBRARY_PATH (or name the file in LIFTOFF_CUBLAS_LIBRARY)",
       config::get_string(config::Knob::cublas_library)});
  return *lib;
}

template <class Fn>
Fn cublas_function(const char* name) {
  return reinterpret_cast<Fn>(cublas_library().require(name));
}
}  // namespace

bool cublas_loaded() {
  return cublas_library().loaded();
}

std::string cublas_load_error() {
  return cublas_library().load_error();
}

}  // namespace liftoff::cuda

#define LIFTOFF_CUBLAS_FORWARD(name, params, args)                                            \
  cublasStatus_t CUBLASWINAPI name params {                                                   \
    static const auto fn = ::liftoff::cuda::cublas_function<cublasStatus_t(*) params>(#name); \
    return fn args;                                                                           \
  }

extern "C" {

// Asked by doctor and system_info also when cuBLAS is missing: answers instead of throwing.
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value) {
  if (!::liftoff::cuda::cublas_loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
  static const auto fn =
      ::liftoff::cuda::cublas_function<cublasStatus_t (*)(libraryPropertyType, int*)>("cublasGetProperty");
  return fn(type, value);
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  if (!::liftoff::cuda::cublas_loaded()) return "cuBLAS is not loaded";
  static const auto fn =
      ::liftoff::cuda::cublas_function<const char* (*)(cublasStatus_t)>("cublasGetStatusString");
  return fn(status);
}

LIFTOFF_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
LIFTOFF_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId), (handle, streamId))
LIFTOFF_CUBLAS_FORWARD(cublasSetWorkspace_v2,
                       (cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes),
                       (handle, workspace, workspaceSizeInBytes))
LIFTOFF_CUBLAS_FORWARD(cublasGemmStridedBatchedEx,
                       (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                        int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                        long long int strideA, const void* B, cudaDataType Btype, int ldb,
                        long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                        long long int strideC, int batchCount, cublasComputeType_t computeType,
                        cublasGemmAlgo_t algo),
                       (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
                        strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo))
LIFTOFF_CUBLAS_FORWARD(cublasGemmBatchedEx,
                       (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                        int n, int k, const void* alpha, const void* const Aarray[], cudaDataType Atype,
                        int lda, const void* const Barray[], cudaDataType Btype, int ldb, const void* beta,
                        void* const Carray[], cudaDataType Ctype, int ldc, int batchCount,
                        cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                       (handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta,
                        Carray, Ctype, ldc, batchCount, computeType, algo))

}  // extern "C"
