#include <climits>

#include "ops/linear/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // blockDim.y of the column-sum kernel

template <class T>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  LIFTOFF_GRID_STRIDE_LOOP(i, rows * cols) {
    y[i] = convert<T>(convert<acc_t<T>>(y[i]) + convert<acc_t<T>>(bias[i % cols]));
  }
}

// Column sums with a fixed order: thread (x, y) sums rows y, y + 8, ... of its column, then the 8 partials
// are added in shared memory. Coalesced along the row, no atomics.
template <class T>
__global__ void bias_grad_kernel(const T* gy, T* gb, int64_t rows, int64_t cols) {
  __shared__ acc_t<T> partial[kRowsPerBlock][kWarp + 1];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kWarp) + threadIdx.x;
  acc_t<T> acc = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowsPerBlock) acc += convert<acc_t<T>>(gy[r * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    acc_t<T> total = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) total += partial[r][threadIdx.x];
    gb[col] = convert<T>(total);
  }
}

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
}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& c) {
  const int device = a.device().index;
  DeviceGuard guard(device);
  const int64_t m = c.size(0);
  const int64_t n = c.size(1);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  cudaStream_t stream = compute_stream(device);
  if (k == 0) {  // empty sum: all-zero bits are 0.0 in every float type
    LIFTOFF_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0, c.nbytes(), stream));
    return;
  }
  LIFTOFF_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, ShapeError, "matmul: dimensions M=", m,
                " N=", n, " K=", k, " exceed cuBLAS's 32-bit limit");
  dispatch_device_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    using Scalar = acc_t<T>;  // alpha/beta type matches the compute type
    const GemmTypes types = gemm_types<T>();
    const Scalar alpha = 1;
    const Scalar beta = 0;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    const int lda = static_cast<int>(transpose_a ? m : k);
    const int ldb = static_cast<int>(transpose_b ? k : n);
    LIFTOFF_CUBLAS_CHECK(cublasGemmEx(cublas_handle(device), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                      static_cast<int>(m), static_cast<int>(k), &alpha, b.raw_data(),
                                      types.data, ldb, a.raw_data(), types.data, lda, &beta, c.raw_data(),
                                      types.data, static_cast<int>(n), types.compute, CUBLAS_GEMM_DEFAULT));
  });
}

void bias_add(const Tensor& y, const Tensor& bias) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  const int64_t rows = y.size(0);
  const int64_t cols = y.size(1);
  if (rows * cols == 0) return;
  dispatch_device_float(y.dtype(), "linear bias", [&](auto tag) {
    using T = decltype(tag);
    bias_add_kernel<T><<<grid_for(rows * cols), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), rows, cols);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void bias_grad(const Tensor& gy, const Tensor& gb) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t rows = gy.size(0);
  const int64_t cols = gy.size(1);
  if (cols == 0) return;
  dispatch_device_float(gy.dtype(), "linear bias backward", [&](auto tag) {
    using T = decltype(tag);
    const dim3 block(kWarp, kRowsPerBlock);
    const dim3 grid(static_cast<unsigned>((cols + kWarp - 1) / kWarp));
    bias_grad_kernel<T><<<grid, block, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gb.raw_data()), rows, cols);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
