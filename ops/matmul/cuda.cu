#include <climits>

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

// One thread per output element: its offset in x from the kept dims, then a walk over the reduced dims.
template <class T>
__global__ void sum_to_kernel(const T* x, T* out, int64_t n_out, int64_t reduced, SumToIndexer index) {
  LIFTOFF_GRID_STRIDE_LOOP(o, n_out) {
    int64_t base = 0;
    int64_t rest = o;
    for (int d = index.kept_ndim - 1; d >= 0; --d) {
      base += rest % index.kept_sizes[d] * index.kept_strides[d];
      rest /= index.kept_sizes[d];
    }
    acc_t<T> acc = 0;
    for (int64_t r = 0; r < reduced; ++r) {
      int64_t off = base, rr = r;
      for (int d = index.red_ndim - 1; d >= 0; --d) {
        off += rr % index.red_sizes[d] * index.red_strides[d];
        rr /= index.red_sizes[d];
      }
      acc += convert<acc_t<T>>(x[off]);
    }
    out[o] = convert<T>(acc);
  }
}
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
    LIFTOFF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        cublas_handle(device), b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
        a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &alpha_s, b.data, types.data, static_cast<int>(b.ld),
        static_cast<long long>(b.batch_stride), a.data, types.data, static_cast<int>(a.ld),
        static_cast<long long>(a.batch_stride), &beta, c.raw_data(), types.data, static_cast<int>(n),
        static_cast<long long>(m * n), static_cast<int>(batch), types.compute, CUBLAS_GEMM_DEFAULT));
  });
}

void sum_to(const Tensor& x, const Tensor& out, const SumToIndexer& index) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  int64_t reduced = 1;
  for (int d = 0; d < index.red_ndim; ++d) reduced *= index.red_sizes[d];
  dispatch_device_float(x.dtype(), "sum_to", [&](auto tag) {
    using T = decltype(tag);
    sum_to_kernel<T><<<grid_for(n_out), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), n_out, reduced, index);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
