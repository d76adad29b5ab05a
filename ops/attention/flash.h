// The fused (FlashAttention-2 style) path of scaled_dot_product_attention on CUDA: one kernel computes
// softmax(q k^T * scale) v tile by tile with an online softmax, never materialising the [L, S] weights, and
// saves only the output and the row logsumexp; the backward recomputes the weights tile by tile.
// It takes f16/bf16 CUDA inputs with E == Ev in {32, 64, 128}, no attn_mask and no dropout (is_causal is
// supported). Which of the plain path, these kernels and cuDNN's fused attention runs a call: path.h.
#pragma once
#include <cstdint>

#include "ops/attention/kernels.h"
#include "runtime/tensor.h"

namespace liftoff {

// Whether flash_attention() can take a call with these (autocast, checked) inputs (and
// LIFTOFF_ATTENTION_FUSED is not 0); whether it does: attention_path() (path.h).
bool flash_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                             double dropout_p);

// out [batch..., L, E] for q [..., L, E], k [..., S, E], v [..., S, E] (batch dims broadcast to `batch`),
// recorded for autograd. Call only where flash_attention_applies().
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double scale,
                       bool is_causal);

// What the kernels read: element (n, i, d) of q is at q + offset(n) + i * row + d, where offset walks the
// broadcast batch dims (innermost last) with the tensor's own strides (0 where it is broadcast). Every
// stride is a multiple of 8 elements and the data 16-byte aligned (vector loads); the last dim is dense.
struct FlashOperand {
  const void* data = nullptr;
  int64_t batch_strides[kMaxAttentionBatchDims] = {};
  int64_t row = 0;
};

struct FlashProblem {
  FlashOperand q, k, v;
  int batch_ndim = 0;
  int64_t batch_sizes[kMaxAttentionBatchDims] = {};
  int64_t batch = 0;  // product of batch_sizes
  int64_t l = 0, s = 0;
  int head_dim = 0;
  float scale = 0.f;
  float scale_log2 = 0.f;  // scale * log2(e): the kernels exponentiate with exp2
  bool causal = false;
  bool pipelined = false;  // which kernel family runs it (flash_pipelined_applies)
};

// Two kernel families run the fused path. The simple kernels (64 query rows or keys per block of 4 warps,
// synchronous loads) fit ViT-tiny's short rows, where a sequence is one tile; the pipelined ones (128 rows
// per block of 8 warps, cp.async double-buffered tiles, ldmatrix fragments, causal blocks longest first)
// are for long sequences. The automatic choice goes by length; an override lets the tests run both
// families on every shape and attention_bench time them side by side (--kernels).
enum class FlashKernels { automatic, simple, pipelined };
void set_flash_kernels(FlashKernels kernels);  // process-wide, until set back to automatic
FlashKernels flash_kernels();
// Whether a call with L queries and S keys runs the pipelined kernels (the override, else by length).
bool flash_pipelined_applies(int64_t l, int64_t s);

#if LIFTOFF_WITH_CUDA
namespace cuda {
// out [batch, L, D] (q's dtype) and lse [batch, L] (f32, log2 units: log2 of sum_j 2^(s_ij * scale_log2)),
// both contiguous.
void flash_forward(const FlashProblem& problem, const Tensor& out, const Tensor& lse);
// grad_out and out contiguous [batch, L, D]; writes grad_q [batch, L, D], grad_k and grad_v [batch, S, D]
// (contiguous, full batch: the front sums them over broadcast dims). delta [batch, L] and grad_q_acc
// [batch, L, D] are f32 scratch.
void flash_backward(const FlashProblem& problem, const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                    const Tensor& delta, const Tensor& grad_q_acc, const Tensor& grad_q, const Tensor& grad_k,
                    const Tensor& grad_v);
}  // namespace cuda
#endif

}  // namespace liftoff
