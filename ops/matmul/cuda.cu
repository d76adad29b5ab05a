#include <climits>

#include "ops/matmul/gemm_search.h"
#include "ops/matmul/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

template <class T>
GemmTypes gemm_types() {
  if constexpr (std::is_same_v<T, float>) {
    return {CUDA_R_32F, CUBLAS_COMPUTE_32F};  // plain f32, no TF32 (PyTorch's matmul default)
  } else if constexpr (std::is_same_v<T, double>) {
    return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
  } else if constexpr (std::is_same_v<T, __half>) {
    return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
  } else {
    return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
  }
}

// At and above this many FLOPs a call (2 m n k batch), GEMMs take the handle with a large workspace.
constexpr double kLargeGemmFlops = 8e9;

}  // namespace

void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const Tensor& c, int64_t batch, int64_t m,
                  int64_t n, int64_t k, double alpha) {
  const int device = c.device().index;
  DeviceGuard guard(device);
  if (batch == 0 || m == 0 || n == 0) return;
  cudaStream_t stream = compute_stream(device);
  if (k == 0) {  // empty sum: all-zero bits are 0.0 in every float type
    LIFTOFF_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0, c.nbytes(), stream));
    return;
  }
  LIFTOFF_CHECK(
      m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && a.ld <= INT_MAX && b.ld <= INT_MAX && batch <= INT_MAX,
      ShapeError, "matmul: dimensions batch=", batch, " M=", m, " N=", n, " K=", k,
      " exceed cuBLAS's 32-bit limit");
  dispatch_device_float(c.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    using Scalar = acc_t<T>;  // alpha/beta type matches the compute type
    const GemmTypes types = gemm_types<T>();
    const Scalar alpha_s = static_cast<Scalar>(alpha);
    const Scalar beta = 0;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. A stored row-major
    // matrix read column-major is its transpose with the same leading dimension.
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                         static_cast<double>(batch);
    if constexpr (!std::is_same_v<T, double>) {
      if (flops >= kLargeGemmFlops) {
        GemmCall call;
        call.device = device;
        call.stream = stream;
        call.trans_a = b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
        call.trans_b = a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
        call.m = n;
        call.n = m;
        call.k = k;
        call.a = b.data;
        call.b = a.data;
        call.c = c.raw_data();
        call.lda = b.ld;
        call.ldb = a.ld;
        call.ldc = n;
        call.stride_a = b.batch_stride;
        call.stride_b = a.batch_stride;
        call.stride_c = m * n;
        call.batch = batch;
        call.data_type = types.data;
        call.alpha = static_cast<float>(alpha);
        if (searched_gemm(call)) return;
      }
    }
    cublasHandle_t handle =
        flops >= kLargeGemmFlops ? cublas_large_gemm_handle(device) : cublas_handle(device);
    LIFTOFF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha_s, b.data, types.data,
        static_cast<int>(b.ld), static_cast<long long>(b.batch_stride), a.data, types.data,
        static_cast<int>(a.ld), static_cast<long long>(a.batch_stride), &beta, c.raw_data(), types.data,
        static_cast<int>(n), static_cast<long long>(m * n), static_cast<int>(batch), types.compute,
        CUBLAS_GEMM_DEFAULT));
  });
}

}  // namespace liftoff::cuda
