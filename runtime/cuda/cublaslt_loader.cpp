// cuBLASLt is loaded at run time (dlopen) rather than linked, as cuBLAS is (cublas_loader.cpp): the
// installed libliftoff.so has no libcublasLt NEEDED entry. Each cuBLASLt function Liftoff calls is defined
// here with the header's signature and forwards to the library.
#include <cublasLt.h>

#include <string>

#include "runtime/cuda/cublaslt_loader.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::cuda {

namespace {
platform::RuntimeLibrary& cublaslt_library() {
  static auto* lib = new platform::RuntimeLibrary(
      {"cuBLASLt " + std::to_string(CUBLAS_VER_MAJOR) + " (libcublasLt.so." +
           std::to_string(CUBLAS_VER_MAJOR) + ")",
       {"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublasLt.so"},
       "install the CUDA toolkit's cuBLAS (NVIDIA package libcublas-" + std::to_string(CUBLAS_VER_MAJOR) +
           "-0, which ships libcublasLt) or add its lib folder to LD_LIBRARY_PATH",
       std::nullopt});
  return *lib;
}

template <class Fn>
Fn cublaslt_function(const char* name) {
  return reinterpret_cast<Fn>(cublaslt_library().require(name));
}
}  // namespace

bool cublaslt_loaded() {
  return cublaslt_library().loaded();
}

std::string cublaslt_load_error() {
  return cublaslt_library().load_error();
}

}  // namespace liftoff::cuda

#define LIFTOFF_CUBLASLT_FORWARD(name, params, args)                                            \
  cublasStatus_t CUBLASWINAPI name params {                                                     \
    static const auto fn = ::liftoff::cuda::cublaslt_function<cublasStatus_t(*) params>(#name); \
    return fn args;                                                                             \
  }

extern "C" {

LIFTOFF_CUBLASLT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulDescCreate,
                         (cublasLtMatmulDesc_t * desc, cublasComputeType_t computeType,
                          cudaDataType_t scaleType),
                         (desc, computeType, scaleType))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute,
                         (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                          size_t sizeInBytes),
                         (desc, attr, buf, sizeInBytes))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate,
                         (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
                          int64_t ld),
                         (layout, type, rows, cols, ld))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatrixLayoutSetAttribute,
                         (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                          const void* buf, size_t sizeInBytes),
                         (layout, attr, buf, sizeInBytes))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
                         (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                          const void* buf, size_t sizeInBytes),
                         (pref, attr, buf, sizeInBytes))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
                         (cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                          cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                          cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                          cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                          cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
                         (handle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
                          heuristicResultsArray, returnAlgoCount))
LIFTOFF_CUBLASLT_FORWARD(cublasLtMatmul,
                         (cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                          const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                          cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                          cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                          const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                          cudaStream_t stream),
                         (handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                          workspace, workspaceSizeInBytes, stream))

}  // extern "C"
