// Kernels behind matmul(), bmm(), linear() and attention's products: a batch of GEMMs over strided operands.
// Operands are checked by the fronts.
#pragma once
#include <cstdint>

#include "runtime/macros.h"
#include "runtime/tensor.h"

namespace liftoff {

// The most batch dims a MatrixBatch spells out (more are copied to one stride by the front).
constexpr int kMaxGemmBatchDims = 4;

// One operand (or the result) of a batched GEMM: element (r, c) of a stored row-major matrix is at r * ld + c
// from the matrix's start; with `transpose` the operand is the stored matrix's transpose (a transposed view
// costs no copy). Matrix i of the batch starts at data + i * batch_stride elements (0: every entry reads the
// same matrix), or, where `dims` > 0, at the sum of index_d * strides[d] with i read row-major over
// sizes[0, dims): the batch of a permuted view, such as the heads [N, H] of a [N, L, H, D] tensor, whose
// entries are not one stride apart. The result's MatrixBatch is never transposed; its data is written.
struct MatrixBatch {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t ld = 1;
  bool transpose = false;
  int dims = 0;
  int64_t sizes[kMaxGemmBatchDims] = {};
  int64_t strides[kMaxGemmBatchDims] = {};

  LIFTOFF_HD int64_t start(int64_t i) const {
    if (dims == 0) return i * batch_stride;
    int64_t at = 0;
    for (int d = dims - 1; d >= 0; --d) {
      at += (i % sizes[d]) * strides[d];
      i /= sizes[d];
    }
    return at;
  }
};

namespace cpu {
// c[i] = alpha * op(a[i]) @ op(b[i]) for i < batch, written where `c` says (of `out`'s dtype; out is the
// result's tensor, any strides); k may be 0 (c = 0).
void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const MatrixBatch& c, const Tensor& out,
                  int64_t batch, int64_t m, int64_t n, int64_t k, double alpha);
}  // namespace cpu
namespace cuda {
// cublasGemmStridedBatchedEx (or the searched cuBLASLt kernel) when every batch is one stride, else
// cublasGemmBatchedEx over arrays of matrix addresses built on the device; f32 compute for f16/bf16/f32 (no
// TF32, PyTorch's matmul default).
void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const MatrixBatch& c, const Tensor& out,
                  int64_t batch, int64_t m, int64_t n, int64_t k, double alpha);
}  // namespace cuda
}  // namespace liftoff
