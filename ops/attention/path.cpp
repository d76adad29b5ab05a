#include "ops/attention/path.h"

#include <atomic>

#include "ops/attention/cudnn_sdpa.h"
#include "runtime/config.h"
#include "runtime/determinism.h"

namespace liftoff {

namespace {
std::atomic<AttentionPath> g_forced_path{AttentionPath::automatic};

bool fused_candidate(const AttentionCallFacts& call) {
  return call.cuda && call.half && !call.masked && !call.dropout && !call.empty;
}
}  // namespace

const char* attention_path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::automatic:
      return "automatic";
    case AttentionPath::plain:
      return "plain";
    case AttentionPath::flash:
      return "flash";
    case AttentionPath::cudnn:
      return "cudnn";
  }
  return "?";
}

void set_attention_path(AttentionPath path) {
  g_forced_path.store(path);
}

AttentionPath attention_path_override() {
  return g_forced_path.load();
}

bool flash_takes(const AttentionCallFacts& call) {
  return fused_candidate(call) && call.ev == call.e && (call.e == 32 || call.e == 64 || call.e == 128);
}

bool cudnn_takes(const AttentionCallFacts& call) {
  // cuDNN's backward rejects a single query with a single key (cudnn-frontend's support checks).
  return fused_candidate(call) && call.ev == call.e && call.e % 8 == 0 && call.e <= 128 &&
         !(call.l == 1 && call.s == 1);
}

AttentionPath cudnn_fallback_path(const AttentionCallFacts& call) {
  return flash_takes(call) ? AttentionPath::flash : AttentionPath::plain;
}

AttentionPath choose_attention_path(const AttentionCallFacts& call, const AttentionPathContext& context) {
  if (!context.fused_enabled || context.deterministic) return AttentionPath::plain;
  const bool cudnn = context.cudnn_available && cudnn_takes(call);
  switch (context.forced) {
    case AttentionPath::plain:
      return AttentionPath::plain;
    case AttentionPath::flash:
      return flash_takes(call) ? AttentionPath::flash : AttentionPath::plain;
    case AttentionPath::cudnn:
      return cudnn ? AttentionPath::cudnn : cudnn_fallback_path(call);
    case AttentionPath::automatic:
      break;
  }
  // cuDNN's kernels were the faster at every length measured (L = 65 to 4096, docs/perf.md session 11).
  if (cudnn) return AttentionPath::cudnn;
  return flash_takes(call) ? AttentionPath::flash : AttentionPath::plain;
}

AttentionCallFacts attention_call_facts(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& attn_mask, double dropout_p) {
  AttentionCallFacts call;
  call.cuda = q.device().is_cuda();
  call.half = q.dtype() == DType::f16 || q.dtype() == DType::bf16;
  call.masked = attn_mask.defined();
  call.dropout = dropout_p > 0.0;
  call.empty = q.numel() == 0 || k.numel() == 0 || v.numel() == 0;
  call.e = q.size(-1);
  call.ev = v.size(-1);
  call.l = q.size(-2);
  call.s = k.size(-2);
  return call;
}

AttentionPath attention_path(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                             double dropout_p) {
  AttentionPathContext context;
  context.fused_enabled = config::get_bool(config::Knob::attention_fused).value_or(true);
  context.forced = attention_path_override();
  context.deterministic = deterministic_algorithms();
  context.cudnn_available = q.device().is_cuda() && cudnn_sdpa_available();
  return choose_attention_path(attention_call_facts(q, k, v, attn_mask, dropout_p), context);
}

#if !LIFTOFF_WITH_CUDA
// A build without CUDA has no cuDNN path (cudnn_sdpa.cpp is not compiled).
bool cudnn_sdpa_available() {
  return false;
}

int64_t cudnn_sdpa_executions() {
  return 0;
}

std::string cudnn_sdpa_failures() {
  return "";
}

Tensor cudnn_attention(const Tensor&, const Tensor&, const Tensor&, const Shape&, double, bool) {
  return Tensor();
}
#endif

}  // namespace liftoff
