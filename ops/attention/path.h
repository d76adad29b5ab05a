// Which implementation runs a scaled_dot_product_attention call. Three paths compute the same thing:
//  - plain: batched GEMM, one mask/causal/softmax/dropout row kernel, batched GEMM (CPU and CUDA, every
//    dtype, mask and dropout; the reference);
//  - flash: Liftoff's own FlashAttention-2 style kernels (flash.h: f16/bf16 CUDA, E == Ev in {32, 64, 128});
//  - cudnn: cuDNN's fused flash attention through its graph API (cudnn_sdpa.h: f16/bf16 CUDA, E == Ev a
//    multiple of 8 up to 128, cuDNN >= 9.16 loaded).
// The fused paths take no attn_mask and no dropout (is_causal is fine). The automatic choice: cuDNN's
// where it takes the call (on the H200 its Hopper wgmma kernels beat ours at every length measured, ViT-
// tiny's L = 65 included: 1.7-2.6x, docs/perf.md session 11), else ours, else plain. A cuDNN call whose plan
// does not build (or a shape first met inside a graph capture) runs ours (else the plain path) without an
// error. LIFTOFF_ATTENTION_FUSED=0 and deterministic algorithms (runtime/determinism.h: the fused backwards
// add dQ with atomics) make every call plain; set_attention_path overrides the choice for tests and
// attention_bench.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

enum class AttentionPath { automatic, plain, flash, cudnn };
const char* attention_path_name(AttentionPath path);

// Process-wide, until set back to automatic. A forced fused path still needs a call it can take: a call
// the forced path cannot take goes to the next one (cudnn -> flash -> plain).
void set_attention_path(AttentionPath path);
AttentionPath attention_path_override();

// What the choice depends on, so that it is a pure function (unit-tested without a GPU).
struct AttentionCallFacts {
  bool cuda = false;
  bool half = false;  // f16 or bf16
  bool masked = false;
  bool dropout = false;
  bool empty = false;  // any of q, k, v has no element
  int64_t e = 0, ev = 0, l = 0, s = 0;
};
struct AttentionPathContext {
  bool fused_enabled = true;     // LIFTOFF_ATTENTION_FUSED
  bool cudnn_available = false;  // cudnn_sdpa_available()
  // runtime/determinism.h: both fused backwards add dQ with atomics (not bit-reproducible): plain.
  bool deterministic = false;
  AttentionPath forced = AttentionPath::automatic;
};

bool flash_takes(const AttentionCallFacts& call);
bool cudnn_takes(const AttentionCallFacts& call);
// plain, flash or cudnn (never automatic).
AttentionPath choose_attention_path(const AttentionCallFacts& call, const AttentionPathContext& context);
// Where a cudnn call goes when its plan does not build: ours when they take it, else plain.
AttentionPath cudnn_fallback_path(const AttentionCallFacts& call);

// The facts of a call with these (autocast, checked) inputs, and the path it takes in this process.
AttentionCallFacts attention_call_facts(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& attn_mask, double dropout_p);
AttentionPath attention_path(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                             double dropout_p);

}  // namespace liftoff
