// The cuDNN path of scaled_dot_product_attention (ops/attention/cudnn_sdpa.h): forward and the three
// gradients against an f32 reference computed by the plain CUDA path from the same half inputs, in f16 and
// bf16, causal and not, head dims 64, 128 and 96 (one our kernels lack), L != S, lengths that are not
// multiples of 64 or 128, permuted (strided) and broadcast operands, zero to three batch dims, and under a
// CUDA graph capture. Every check also asserts that cuDNN really ran (its execution counter moved), so a
// silent fallback to Liftoff's kernels fails the test with cuDNN's reasons.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ops/attention/attention.h"
#include "ops/attention/cudnn_sdpa.h"
#include "ops/attention/path.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

#define LIFTOFF_REQUIRE_CUDNN_SDPA()                                                                \
  do {                                                                                              \
    LIFTOFF_REQUIRE_CUDA();                                                                         \
    if (!cudnn_sdpa_available()) GTEST_SKIP() << "cuDNN >= 9.16 is not loaded: no cuDNN attention"; \
  } while (0)

struct Tolerance {
  DType dtype;
  double atol, rtol;
};
// As the flash tests: the weights and dS are rounded to the dtype before the second products.
const Tolerance kHalves[] = {{DType::f16, 2e-2, 2e-2}, {DType::bf16, 8e-2, 5e-2}};

class ScopedAttentionPath {
 public:
  explicit ScopedAttentionPath(AttentionPath path) { set_attention_path(path); }
  ~ScopedAttentionPath() { set_attention_path(AttentionPath::automatic); }
  ScopedAttentionPath(const ScopedAttentionPath&) = delete;
  ScopedAttentionPath& operator=(const ScopedAttentionPath&) = delete;
};

using AttentionFn = std::function<Tensor(const std::vector<Tensor>&)>;

AttentionFn plain_call(bool causal) {
  return [causal](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, causal);
  };
}

// Output and input gradients of fn on CUDA: inputs are `cpu_inputs` rounded to `dtype`, then (for the
// reference) widened to f32, which runs the plain path; the output gradient is the same rounded tensor.
std::vector<Tensor> run(const AttentionFn& fn, const std::vector<Tensor>& cpu_inputs, DType dtype,
                        bool reference) {
  std::vector<Tensor> in;
  for (const Tensor& x : cpu_inputs) {
    Tensor d = x.detach().to(Device::cuda(), dtype);
    if (reference) d = d.to(Device::cuda(), DType::f32);
    in.push_back(d.set_requires_grad(true));
  }
  const Tensor out = fn(in);
  Tensor weights = testing::random_tensor(out.shape(), 777, 0.5, 1.5, dtype, Device::cuda());
  out.backward(reference ? weights.to(Device::cuda(), DType::f32) : weights);
  std::vector<Tensor> results = {out.to(Device::cpu(), DType::f64)};
  for (const Tensor& x : in) results.push_back(x.grad().to(Device::cpu(), DType::f64));
  return results;
}

// fn on the cuDNN path (forced) against the f32 plain reference; fails when cuDNN did not run.
::testing::AssertionResult cudnn_matches_reference(const AttentionFn& fn, const std::vector<Tensor>& in,
                                                   const Tolerance& t) {
  std::vector<Tensor> cudnn;
  const int64_t before = cudnn_sdpa_executions();
  {
    ScopedAttentionPath forced(AttentionPath::cudnn);
    cudnn = run(fn, in, t.dtype, false);
  }
  if (cudnn_sdpa_executions() != before + 2) {
    return ::testing::AssertionFailure() << "cuDNN ran " << cudnn_sdpa_executions() - before
                                         << " of 2 calls (forward, backward); plan failures:\n"
                                         << cudnn_sdpa_failures();
  }
  const std::vector<Tensor> reference = run(fn, in, t.dtype, true);
  for (size_t i = 0; i < cudnn.size(); ++i) {
    auto r = testing::all_close(cudnn[i], reference[i], t.atol, t.rtol);
    if (!r)
      return ::testing::AssertionFailure()
             << (i == 0 ? "output" : "gradient " + std::to_string(i - 1)) << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

std::vector<Tensor> random_inputs(const std::vector<Shape>& shapes, uint64_t seed) {
  std::vector<Tensor> in;
  for (const Shape& shape : shapes) in.push_back(testing::random_tensor(shape, seed++));
  return in;
}

void check_both_dtypes(const AttentionFn& fn, const std::vector<Tensor>& in, const std::string& what) {
  for (const Tolerance& t : kHalves) {
    EXPECT_TRUE(cudnn_matches_reference(fn, in, t)) << what << " " << dtype_name(t.dtype);
  }
}

TEST(AttentionCudnnCuda, MatchesReferenceForHeadDimsLengthsAndCausal) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  // (L, S): one 128 tile, lengths cut by 64- and 128-row tiles, cross attention both ways.
  const std::vector<std::pair<int64_t, int64_t>> lengths = {{128, 128}, {197, 197}, {300, 300},
                                                            {200, 333}, {333, 200}, {100, 150}};
  uint64_t seed = 100;
  for (const int64_t d : {64, 128}) {
    for (const auto& [l, s] : lengths) {
      const std::vector<Tensor> in = random_inputs({{2, 3, l, d}, {2, 3, s, d}, {2, 3, s, d}}, seed += 3);
      for (const bool causal : {false, true}) {
        check_both_dtypes(plain_call(causal), in,
                          str_cat("D ", d, " L ", l, " S ", s, causal ? " causal" : ""));
      }
    }
  }
}

TEST(AttentionCudnnCuda, HeadDimOurKernelsLackAndCustomScale) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  const std::vector<Tensor> in = random_inputs({{2, 2, 160, 96}, {2, 2, 140, 96}, {2, 2, 140, 96}}, 200);
  check_both_dtypes(plain_call(true), in, "D 96 causal");
  const AttentionFn scaled = [](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, false, 0.3);
  };
  check_both_dtypes(scaled, in, "D 96 scale 0.3");
}

TEST(AttentionCudnnCuda, PermutedProjectionsAsVitTiny) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  // [B, L, H, D] projections permuted to [B, H, L, D] (strided rows: read in place), plus a transposed
  // value ([B, H, D, S] -> [B, H, S, D]: last dim not dense, copied once).
  const std::vector<Tensor> in = random_inputs({{2, 197, 3, 64}, {2, 197, 3, 64}, {2, 3, 64, 197}}, 300);
  const AttentionFn fn = [](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0].permute({0, 2, 1, 3}), x[1].permute({0, 2, 1, 3}),
                                        x[2].permute({0, 1, 3, 2}), Tensor(), 0.0, true);
  };
  check_both_dtypes(fn, in, "permuted");
  // Heads outermost ([H, B, L, D] permuted to [B, H, L, D]): b and h strides in the other order.
  const std::vector<Tensor> swapped = random_inputs({{3, 2, 150, 64}, {3, 2, 150, 64}, {3, 2, 150, 64}}, 310);
  const AttentionFn heads_outer = [](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0].permute({1, 0, 2, 3}), x[1].permute({1, 0, 2, 3}),
                                        x[2].permute({1, 0, 2, 3}));
  };
  check_both_dtypes(heads_outer, swapped, "heads outermost");
}

TEST(AttentionCudnnCuda, BroadcastAndBatchDimCounts) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  // k/v shared by the heads (multi-query), and q without the leading batch dim.
  check_both_dtypes(plain_call(false),
                    random_inputs({{2, 3, 140, 64}, {2, 1, 170, 64}, {2, 1, 170, 64}}, 400), "shared k/v");
  check_both_dtypes(plain_call(true), random_inputs({{3, 150, 64}, {2, 1, 150, 64}, {2, 3, 150, 64}}, 410),
                    "broadcast q");
  // No batch dim, one, and three (two of them collapse to cuDNN's b).
  check_both_dtypes(plain_call(true), random_inputs({{200, 64}, {200, 64}, {200, 64}}, 420), "[L, E]");
  check_both_dtypes(plain_call(false), random_inputs({{4, 130, 64}, {4, 130, 64}, {4, 130, 64}}, 430),
                    "[N, L, E]");
  check_both_dtypes(plain_call(true),
                    random_inputs({{2, 2, 3, 129, 64}, {2, 2, 3, 129, 64}, {2, 2, 3, 129, 64}}, 440),
                    "[A, B, H, L, E]");
}

TEST(AttentionCudnnCuda, AutomaticChoiceAndInference) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  const auto make = [](int64_t l, uint64_t seed) {
    return testing::random_tensor({2, 4, l, 64}, seed, -1, 1, DType::bf16, Device::cuda());
  };
  // Automatic: cuDNN for long rows and ViT-tiny's one-tile rows alike. No gradient: forward only.
  int64_t before = cudnn_sdpa_executions();
  const Tensor long_q = make(256, 1);
  const Tensor out = scaled_dot_product_attention(long_q, make(256, 2), make(256, 3), Tensor(), 0.0, true);
  EXPECT_EQ(cudnn_sdpa_executions(), before + 1) << cudnn_sdpa_failures();
  before = cudnn_sdpa_executions();
  scaled_dot_product_attention(make(65, 4), make(65, 5), make(65, 6));
  EXPECT_EQ(cudnn_sdpa_executions(), before + 1) << cudnn_sdpa_failures();
  // The same call on our kernels agrees (both fused, both f32 inside).
  ScopedAttentionPath flash(AttentionPath::flash);
  const Tensor ours = scaled_dot_product_attention(long_q, make(256, 2), make(256, 3), Tensor(), 0.0, true);
  EXPECT_TRUE(
      testing::all_close(out.to(Device::cpu(), DType::f64), ours.to(Device::cpu(), DType::f64), 2e-2, 2e-2));
}

// A training step's attention (forward and dQ) captured after an eager warm-up replays like eager.
TEST(AttentionCudnnCuda, CapturesInACudaGraph) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  ScopedAttentionPath forced(AttentionPath::cudnn);
  const Tensor q =
      testing::random_tensor({2, 3, 170, 64}, 41, -1, 1, DType::bf16, Device::cuda()).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 3, 190, 64}, 42, -1, 1, DType::bf16, Device::cuda());
  const Tensor v = testing::random_tensor({2, 3, 190, 64}, 43, -1, 1, DType::bf16, Device::cuda());
  const Tensor weights = testing::random_tensor({2, 3, 170, 64}, 44, 0.5, 1.5, DType::bf16, Device::cuda());
  const auto step = [&] {
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    out.backward(weights);
    return out;
  };
  const int64_t before = cudnn_sdpa_executions();
  const Tensor eager = step().to(Device::cpu(), DType::f64);
  ASSERT_EQ(cudnn_sdpa_executions(), before + 2) << cudnn_sdpa_failures();
  const Tensor eager_grad = q.grad().to(Device::cpu(), DType::f64);
  q.set_grad(Tensor());
  CudaGraph graph(Device::cuda());
  const Tensor captured = testing::capture_into(graph, step);
  EXPECT_EQ(cudnn_sdpa_executions(), before + 4);  // the capture enqueued cuDNN's plans
  graph.replay();
  EXPECT_TRUE(testing::all_close(captured.to(Device::cpu(), DType::f64), eager, 0, 0));
  // dQ may be summed in another order from run to run: one bf16 rounding apart.
  EXPECT_TRUE(testing::all_close(q.grad().to(Device::cpu(), DType::f64), eager_grad, 1e-2, 1e-2));
}

// A shape first met inside a capture cannot build its plan there: our kernels run it, correctly.
TEST(AttentionCudnnCuda, ShapeFirstMetInsideACaptureRunsOurKernels) {
  LIFTOFF_REQUIRE_CUDNN_SDPA();
  ScopedAttentionPath forced(AttentionPath::cudnn);
  const Tensor q = testing::random_tensor({1, 2, 211, 64}, 51, -1, 1, DType::f16, Device::cuda());
  const Tensor k = testing::random_tensor({1, 2, 223, 64}, 52, -1, 1, DType::f16, Device::cuda());
  const Tensor v = testing::random_tensor({1, 2, 223, 64}, 53, -1, 1, DType::f16, Device::cuda());
  const int64_t before = cudnn_sdpa_executions();
  CudaGraph graph(Device::cuda());
  const Tensor captured = testing::capture_into(graph, [&] { return scaled_dot_product_attention(q, k, v); });
  EXPECT_EQ(cudnn_sdpa_executions(), before);
  graph.replay();
  const Tensor eager = scaled_dot_product_attention(q, k, v);  // builds the plan now, runs cuDNN
  EXPECT_EQ(cudnn_sdpa_executions(), before + 1) << cudnn_sdpa_failures();
  EXPECT_TRUE(testing::all_close(captured.to(Device::cpu(), DType::f64), eager.to(Device::cpu(), DType::f64),
                                 2e-2, 2e-2));
}

}  // namespace
}  // namespace liftoff
