#pragma once
#include <optional>

#include "runtime/random.h"
#include "runtime/tensor.h"

namespace liftoff {

// torch.nn.functional.scaled_dot_product_attention:
//   out = dropout(softmax(q @ k^T * scale + mask)) @ v
// query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev]; the batch dims (all but the last
// two) of the three broadcast against each other. scale defaults to 1 / sqrt(E). attn_mask (optional)
// broadcasts to [batch..., L, S]: a u8 tensor is a boolean mask (nonzero = attend, the role of PyTorch's
// bool), a floating one is added to the scores (cast to the query's dtype; it gets a gradient when it
// requires one). is_causal masks key j for query i when j > i (top-left aligned, as PyTorch); it cannot be
// combined with attn_mask (ValueError, as PyTorch). A row whose keys are all masked gives zeros (PyTorch's
// math path gives NaN there; its fused kernels give zeros). dropout_p > 0 drops attention weights with
// ops/dropout's Philox mapping over the flat [batch..., L, S] weights, seeded from gen (required then:
// PyTorch's default generator has no counterpart here); like PyTorch the function has no training flag: pass
// dropout_p = 0 in eval. Drawing the seed makes a call with dropout not capturable in a CUDA graph (as
// dropout()). Dtypes: q, k, v one floating dtype on one device: f32/f64 on the CPU, f32/f64/f16/bf16 on CUDA.
// Autocast: f32 CUDA inputs run in the autocast half dtype. f16/bf16 CUDA calls without mask and dropout run
// fused, on Liftoff's own kernels or cuDNN's (path.h). Plain implementation (both devices): a batched GEMM for
// the scores (scale as its alpha), one fused row kernel for mask + causal + softmax + dropout (f32 arithmetic
// for halves), a batched GEMM with v; the softmax probabilities [batch..., L, S] are kept for backward.
// Backward: dV = Pd^T dO; dPd = dO V^T; dP = dPd * keep / (1 - p); dS = P * (dP - rowsum(dP * P));
// dQ = scale * dS K; dK = scale * dS^T Q; dMask = dS (each summed over its broadcast dims).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

}  // namespace liftoff
