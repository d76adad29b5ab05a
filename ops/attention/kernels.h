// Kernels behind scaled_dot_product_attention(): the row-wise part between its two batched GEMMs. Scores
// [rows = batch * L, S] are contiguous and already scaled (the GEMM's alpha); the mask is read in place
// through broadcast strides; dropout is Philox(seed, offset, i / 4).v[i % 4] for flat element i of [batch, L,
// S], the mapping of ops/dropout, so the CPU and CUDA masks are identical.
#pragma once
#include <cstdint>

#include "runtime/macros.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace liftoff {

constexpr int kMaxAttentionBatchDims = 8;

// How the softmax reads attn_mask: none, boolean (u8, nonzero = attend) or additive (the scores' dtype).
// Element (b, i, j) is at data + batch_offset(b) + i * stride_l + j * stride_s, where batch_offset walks the
// output's batch dims (innermost last) with the mask's strides (0 where it is broadcast).
struct AttentionMask {
  enum Kind { kNone = 0, kBool = 1, kAdditive = 2 };
  int kind = kNone;
  const void* data = nullptr;
  int batch_ndim = 0;
  int64_t batch_sizes[kMaxAttentionBatchDims] = {};
  int64_t batch_strides[kMaxAttentionBatchDims] = {};
  int64_t stride_l = 0;
  int64_t stride_s = 0;

  LIFTOFF_HD int64_t row_offset(int64_t b, int64_t i) const {
    int64_t off = i * stride_l;
    for (int d = batch_ndim - 1; d >= 0; --d) {
      off += b % batch_sizes[d] * batch_strides[d];
      b /= batch_sizes[d];
    }
    return off;
  }
};

struct AttentionRows {
  int64_t rows = 0;     // batch * L
  int64_t l = 0;        // query length (row i of a batch entry is row % l)
  int64_t s = 0;        // key length
  bool causal = false;  // key j is attended only when j <= i (top-left aligned, as PyTorch's is_causal)
  double dropout_p = 0.0;
  PhiloxDraw draw;  // the dropout mask's stream (resolve() it in a kernel: graph-safe on CUDA)
};

// Whether dropout keeps flat element idx of [batch, L, S] (ops/dropout's mapping).
// `draw` resolved (PhiloxDraw::resolve).
LIFTOFF_HD bool attention_keep(const PhiloxDraw& draw, uint64_t idx, float p) {
  return philox_uniform(philox_at(draw.seed, draw.offset, idx / 4).v[idx % 4]) >= p;
}

namespace cpu {
// scores -> probs in place: softmax over each row of scores + mask (masked/causal keys get 0; a row with no
// key left is all 0). With dropout_p > 0, dropped = probs * keep / (1 - p); else dropped is undefined.
void attention_softmax_forward(const Tensor& scores, const Tensor& dropped, const AttentionMask& mask,
                               const AttentionRows& rows);
// grad: gradient of the dropped probabilities in, gradient of the (scaled, masked) scores out, in place:
// dP = grad * keep / (1 - p); dS = P * (dP - sum_j dP_j P_j).
void attention_softmax_backward(const Tensor& probs, const Tensor& grad, const AttentionRows& rows);
}  // namespace cpu
namespace cuda {
// One warp per row, f32 (f64 for f64) arithmetic.
void attention_softmax_forward(const Tensor& scores, const Tensor& dropped, const AttentionMask& mask,
                               const AttentionRows& rows);
void attention_softmax_backward(const Tensor& probs, const Tensor& grad, const AttentionRows& rows);
}  // namespace cuda
}  // namespace liftoff
