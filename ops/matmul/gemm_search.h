// The large-GEMM search of ops/matmul's CUDA kernel (cuda_gemm_search.cpp), as cudnn.benchmark is for
// convolutions: a GEMM of kLargeGemmFlops and more takes, on the first call of its shape, the fastest of
// cuBLASLt's candidate kernels and cuBLAS's own pick, timed on the call's own operands; later calls (also
// inside a CUDA graph capture) reuse that choice, so the search never keeps a kernel slower than cuBLAS's as
// it measured them. Like cudnn.benchmark, each new shape (or operand alignment) costs one search (about 100
// runs of the GEMM and a host wait): models whose GEMM shapes change every step should set
// LIFTOFF_GEMM_SEARCH=0.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace liftoff::cuda {

// One strided batch of column-major GEMMs, C = alpha op(A) op(B), as cublasGemmStridedBatchedEx takes it.
struct GemmCall {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  cudaDataType_t data_type = CUDA_R_32F;  // A, B and C
  float alpha = 1.0f;                     // f32 compute and scale (f16, bf16, f32 data)
};

// Runs the call with the searched kernel and returns true; false when the search does not apply (cuBLASLt
// missing, LIFTOFF_GEMM_SEARCH=0, --deterministic, a concurrent lane, a shape first met inside a capture, or
// no candidate): the caller then takes cuBLAS's own pick.
bool searched_gemm(const GemmCall& call);
// The call through cublasGemmStridedBatchedEx on the large-GEMM handle: cuBLAS's own pick (also a candidate
// of the search). The dimensions must fit in int (the caller checked).
cublasStatus_t cublas_own_gemm(const GemmCall& call);
// How many shapes were searched so far, all devices (tests).
int64_t gemm_searches();

}  // namespace liftoff::cuda
