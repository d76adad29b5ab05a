// Which implementation runs scaled_dot_product_attention (ops/attention/path.h): the pure choice function on
// every rule (no GPU needed), and CPU calls, which always take the plain path.
#include <gtest/gtest.h>

#include "ops/attention/attention.h"
#include "ops/attention/cudnn_sdpa.h"
#include "ops/attention/path.h"
#include "runtime/config.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

AttentionCallFacts fused_call(int64_t e, int64_t l, int64_t s) {
  AttentionCallFacts call;
  call.cuda = true;
  call.half = true;
  call.e = call.ev = e;
  call.l = l;
  call.s = s;
  return call;
}

AttentionPathContext with_cudnn(AttentionPath forced = AttentionPath::automatic) {
  AttentionPathContext context;
  context.cudnn_available = true;
  context.forced = forced;
  return context;
}

TEST(AttentionPath, AutomaticRunsCudnnWhereItTakesTheCall) {
  const AttentionPathContext context = with_cudnn();
  EXPECT_EQ(choose_attention_path(fused_call(64, 65, 65), context), AttentionPath::cudnn);  // vit_tiny
  EXPECT_EQ(choose_attention_path(fused_call(64, 127, 1024), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(64, 1024, 127), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(64, 128, 128), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(64, 197, 197), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(128, 4096, 4096), context), AttentionPath::cudnn);
  // Head dims neither fused path takes are plain.
  EXPECT_EQ(choose_attention_path(fused_call(96, 65, 65), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(32, 1024, 1024), context), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(fused_call(50, 1024, 1024), context), AttentionPath::plain);
  EXPECT_EQ(choose_attention_path(fused_call(256, 1024, 1024), context), AttentionPath::plain);
}

TEST(AttentionPath, WithoutCudnnLongSequencesRunOurKernels) {
  AttentionPathContext context;  // cuDNN missing or older than 9.16
  EXPECT_EQ(choose_attention_path(fused_call(64, 1024, 1024), context), AttentionPath::flash);
  EXPECT_EQ(choose_attention_path(fused_call(96, 1024, 1024), context), AttentionPath::plain);
  context.forced = AttentionPath::cudnn;  // a forced path falls to the next one that takes the call
  EXPECT_EQ(choose_attention_path(fused_call(64, 1024, 1024), context), AttentionPath::flash);
  EXPECT_EQ(choose_attention_path(fused_call(96, 1024, 1024), context), AttentionPath::plain);
}

TEST(AttentionPath, MasksDropoutF32CpuAndEmptyInputsArePlain) {
  const AttentionPathContext context = with_cudnn(AttentionPath::cudnn);
  AttentionCallFacts call = fused_call(64, 1024, 1024);
  call.masked = true;
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  call = fused_call(64, 1024, 1024);
  call.dropout = true;
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  call = fused_call(64, 1024, 1024);
  call.half = false;
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  call = fused_call(64, 1024, 1024);
  call.cuda = false;
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  call = fused_call(64, 1024, 1024);
  call.empty = true;
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  call = fused_call(64, 1024, 1024);
  call.ev = 32;  // E != Ev: neither fused path
  EXPECT_EQ(choose_attention_path(call, context), AttentionPath::plain);
  EXPECT_EQ(choose_attention_path(fused_call(64, 1, 1), context), AttentionPath::flash);  // cuDNN: no 1x1
}

// --deterministic: both fused backwards add dQ with atomics, so every call takes the plain path, forced or
// not.
TEST(AttentionPath, DeterministicAlgorithmsArePlain) {
  for (AttentionPath forced :
       {AttentionPath::automatic, AttentionPath::plain, AttentionPath::flash, AttentionPath::cudnn}) {
    AttentionPathContext context = with_cudnn(forced);
    context.deterministic = true;
    EXPECT_EQ(choose_attention_path(fused_call(64, 1024, 1024), context), AttentionPath::plain);
    EXPECT_EQ(choose_attention_path(fused_call(64, 65, 65), context), AttentionPath::plain);
  }
}

TEST(AttentionPath, OverridesAndTheKnob) {
  const AttentionCallFacts long_call = fused_call(64, 1024, 1024), short_call = fused_call(64, 65, 65);
  EXPECT_EQ(choose_attention_path(long_call, with_cudnn(AttentionPath::flash)), AttentionPath::flash);
  EXPECT_EQ(choose_attention_path(short_call, with_cudnn(AttentionPath::cudnn)), AttentionPath::cudnn);
  EXPECT_EQ(choose_attention_path(long_call, with_cudnn(AttentionPath::plain)), AttentionPath::plain);
  EXPECT_EQ(choose_attention_path(fused_call(96, 65, 65), with_cudnn(AttentionPath::flash)),
            AttentionPath::plain);
  AttentionPathContext off = with_cudnn(AttentionPath::cudnn);
  off.fused_enabled = false;  // LIFTOFF_ATTENTION_FUSED=0 wins over any override
  EXPECT_EQ(choose_attention_path(long_call, off), AttentionPath::plain);
  EXPECT_EQ(cudnn_fallback_path(long_call), AttentionPath::flash);
  EXPECT_EQ(cudnn_fallback_path(fused_call(96, 1024, 1024)), AttentionPath::plain);
}

TEST(AttentionPath, CpuCallsArePlainUnderEveryOverride) {
  const Tensor q = testing::random_tensor({2, 3, 200, 64}, 1);
  for (const AttentionPath forced :
       {AttentionPath::automatic, AttentionPath::plain, AttentionPath::flash, AttentionPath::cudnn}) {
    set_attention_path(forced);
    EXPECT_EQ(attention_path(q, q, q, Tensor(), 0.0), AttentionPath::plain) << attention_path_name(forced);
  }
  set_attention_path(AttentionPath::automatic);
  EXPECT_EQ(attention_path_override(), AttentionPath::automatic);
  // The facts of a real call, as the front reads them.
  const Tensor k = testing::random_tensor({2, 3, 150, 64}, 2), v = testing::random_tensor({2, 3, 150, 32}, 3);
  const AttentionCallFacts facts = attention_call_facts(q, k, v, Tensor(), 0.1);
  EXPECT_FALSE(facts.cuda);
  EXPECT_FALSE(facts.half);
  EXPECT_TRUE(facts.dropout);
  EXPECT_EQ(facts.l, 200);
  EXPECT_EQ(facts.s, 150);
  EXPECT_EQ(facts.e, 64);
  EXPECT_EQ(facts.ev, 32);
  // CPU calls run no cuDNN plan whatever the override.
  const int64_t before = cudnn_sdpa_executions();
  set_attention_path(AttentionPath::cudnn);
  const Tensor out = scaled_dot_product_attention(q, q, q);
  set_attention_path(AttentionPath::automatic);
  EXPECT_EQ(out.shape(), q.shape());
  EXPECT_EQ(cudnn_sdpa_executions(), before);
}

}  // namespace
}  // namespace liftoff
