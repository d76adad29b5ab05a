#include <algorithm>
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

// cublasGemmBatchedEx's operands, column-major as cuBLAS reads them (see the swap below): the addresses of
// b's matrices, then a's, then c's, `batch` each.
__global__ void matrix_addresses_kernel(MatrixBatch a, MatrixBatch b, MatrixBatch c, int element_bytes,
                                        int64_t batch, const void** addresses) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    addresses[i] = static_cast<const char*>(b.data) + b.start(i) * element_bytes;
    addresses[batch + i] = static_cast<const char*>(a.data) + a.start(i) * element_bytes;
    addresses[2 * batch + i] = static_cast<const char*>(c.data) + c.start(i) * element_bytes;
  }
}

}  // namespace

void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const MatrixBatch& c, const Tensor& out,
                  int64_t batch, int64_t m, int64_t n, int64_t k, double alpha) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  if (batch == 0 || m == 0 || n == 0) return;
  cudaStream_t stream = compute_stream(device);
  if (k == 0) {  // empty sum
    out.zero_();
    return;
  }
  LIFTOFF_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && a.ld <= INT_MAX && b.ld <= INT_MAX &&
                    c.ld <= INT_MAX && batch <= INT_MAX,
                ShapeError, "matmul: dimensions batch=", batch, " M=", m, " N=", n, " K=", k,
                " exceed cuBLAS's 32-bit limit");
  dispatch_device_float(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    using Scalar = acc_t<T>;  // alpha/beta type matches the compute type
    const GemmTypes types = gemm_types<T>();
    const Scalar alpha_s = static_cast<Scalar>(alpha);
    const Scalar beta = 0;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. A stored row-major
    // matrix read column-major is its transpose with the same leading dimension.
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                         static_cast<double>(batch);
    cublasHandle_t handle =
        flops >= kLargeGemmFlops ? cublas_large_gemm_handle(device) : cublas_handle(device);
    const cublasOperation_t op_b = b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (a.dims != 0 || b.dims != 0 || c.dims != 0) {
      // Entries not one stride apart (the heads of a permuted view): each matrix's address, built on the
      // device in stream order (capturable), instead of a copy of the operand.
      const Tensor addresses = Tensor::empty({3 * batch}, DType::i64, out.device());
      auto** list = static_cast<const void**>(addresses.raw_data());
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((batch + 255) / 256, 1024));
      matrix_addresses_kernel<<<blocks, 256, 0, stream>>>(a, b, c, static_cast<int>(sizeof(T)), batch, list);
      LIFTOFF_LAUNCH_CHECK();
      LIFTOFF_CUBLAS_CHECK(cublasGemmBatchedEx(
          handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha_s, list,
          types.data, static_cast<int>(b.ld), list + batch, types.data, static_cast<int>(a.ld), &beta,
          const_cast<void**>(list + 2 * batch), types.data, static_cast<int>(c.ld), static_cast<int>(batch),
          types.compute, CUBLAS_GEMM_DEFAULT));
      return;
    }
    if constexpr (!std::is_same_v<T, double>) {
      if (flops >= kLargeGemmFlops) {
        GemmCall call;
        call.device = device;
        call.stream = stream;
        call.trans_a = op_b;
        call.trans_b = op_a;
        call.m = n;
        call.n = m;
        call.k = k;
        call.a = b.data;
        call.b = a.data;
        call.c = const_cast<void*>(c.data);
        call.lda = b.ld;
        call.ldb = a.ld;
        call.ldc = c.ld;
        call.stride_a = b.batch_stride;
        call.stride_b = a.batch_stride;
        call.stride_c = c.batch_stride;
        call.batch = batch;
        call.data_type = types.data;
        call.alpha = static_cast<float>(alpha);
        if (searched_gemm(call)) return;
      }
    }
    LIFTOFF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha_s, b.data,
        types.data, static_cast<int>(b.ld), static_cast<long long>(b.batch_stride), a.data, types.data,
        static_cast<int>(a.ld), static_cast<long long>(a.batch_stride), &beta, const_cast<void*>(c.data),
        types.data, static_cast<int>(c.ld), static_cast<long long>(c.batch_stride), static_cast<int>(batch),
        types.compute, CUBLAS_GEMM_DEFAULT));
  });
}

}  // namespace liftoff::cuda
