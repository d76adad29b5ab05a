// Kernels behind matmul(), bmm(), linear() and attention's products: a strided batch of GEMMs, and the sum of
// a tensor over its broadcast dims (the gradient of a broadcast operand). Operands are checked by the fronts.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

// One operand of a batched GEMM: matrix i of the batch starts at data + i * batch_stride elements (0: every
// batch entry reads the same matrix); element (r, c) of the stored row-major matrix is at r * ld + c. With
// `transpose` the operand is the stored matrix's transpose (a transposed view costs no copy).
struct MatrixBatch {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t ld = 1;
  bool transpose = false;
};

namespace cpu {
// c[i] = alpha * op(a[i]) @ op(b[i]) for i < batch; c contiguous [batch, m, n] of the operands' dtype; k may
// be 0 (c = 0).
void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const Tensor& c, int64_t batch, int64_t m,
                  int64_t n, int64_t k, double alpha);
}  // namespace cpu
namespace cuda {
// cublasGemmStridedBatchedEx; f32 compute for f16/bf16/f32 (no TF32, as ops/linear always did).
void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const Tensor& c, int64_t batch, int64_t m,
                  int64_t n, int64_t k, double alpha);
}  // namespace cuda
}  // namespace liftoff
