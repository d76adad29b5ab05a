// The fused (flash) attention path on CUDA: forward and the three gradients against the CPU f32 reference and
// against the plain CUDA path (LIFTOFF_ATTENTION_FUSED=0), in f16 and bf16, causal and not, every supported
// head dim, lengths that are not multiples of the 64- and 128-row tiles, L != S, broadcast batch dims,
// permuted (non-contiguous) inputs and under CUDA graph capture; both kernel families (simple, pipelined)
// on the odd-length shapes. Scopes that name a family force our kernels (long rows would go to cuDNN).
#include <gtest/gtest.h>

#include "ops/attention/attention.h"
#include "ops/attention/flash.h"
#include "ops/attention/path.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Tolerance {
  DType dtype;
  double atol, rtol;
};
// Inputs, the weights P (before P V) and dS (before dS K, dS^T Q) are rounded to the dtype; bf16 keeps 8
// significant bits, so gradients summed over ~200 keys differ from f32 by a few 1e-2.
const Tolerance kHalves[] = {{DType::f16, 2e-2, 2e-2}, {DType::bf16, 8e-2, 5e-2}};

std::vector<Tensor> random_inputs(const std::vector<Shape>& shapes, uint64_t seed) {
  std::vector<Tensor> in;
  for (const Shape& shape : shapes)
    in.push_back(testing::random_tensor(shape, seed++).set_requires_grad(true));
  return in;
}

testing::TensorFn attention(bool causal) {
  return [causal](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, causal);
  };
}

// The fused path takes these inputs (so a comparison below cannot pass by running the plain path twice).
void expect_fused(const std::vector<Tensor>& cpu_inputs, DType dtype) {
  const Tensor q = cpu_inputs[0].to(Device::cuda(), dtype), k = cpu_inputs[1].to(Device::cuda(), dtype),
               v = cpu_inputs[2].to(Device::cuda(), dtype);
  EXPECT_TRUE(flash_attention_applies(q, k, v, Tensor(), 0.0)) << dtype_name(dtype);
}

// Output and gradients of fn on CUDA in `dtype`, fused vs plain.
::testing::AssertionResult fused_matches_plain(const testing::TensorFn& fn,
                                               const std::vector<Tensor>& cpu_inputs, const Tolerance& t) {
  const auto run = [&](bool fused) {
    config::ScopedSetting setting(config::Knob::attention_fused, fused ? "1" : "0");
    std::vector<Tensor> in;
    for (const Tensor& x : cpu_inputs)
      in.push_back(x.detach().to(Device::cuda(), t.dtype).set_requires_grad(true));
    const Tensor out = fn(in);
    out.backward(testing::random_tensor(out.shape(), 777, 0.5, 1.5, t.dtype, Device::cuda()));
    std::vector<Tensor> results = {out.to(Device::cpu(), DType::f64)};
    for (const Tensor& x : in) results.push_back(x.grad().to(Device::cpu(), DType::f64));
    return results;
  };
  const std::vector<Tensor> fused = run(true), plain = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    auto r = testing::all_close(fused[i], plain[i], t.atol, t.rtol);
    if (!r)
      return ::testing::AssertionFailure()
             << (i == 0 ? "output" : "gradient " + std::to_string(i - 1)) << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

void check_all(const std::vector<Tensor>& in, bool causal, const std::string& what) {
  for (const Tolerance& t : kHalves) {
    testing::ParityOptions options;
    options.atol = t.atol;
    options.rtol = t.rtol;
    options.cuda_dtype = t.dtype;
    expect_fused(in, t.dtype);
    EXPECT_TRUE(testing::cuda_parity(attention(causal), in, options))
        << what << " " << dtype_name(t.dtype) << (causal ? " causal" : "") << " vs CPU";
    EXPECT_TRUE(fused_matches_plain(attention(causal), in, t))
        << what << " " << dtype_name(t.dtype) << (causal ? " causal" : "") << " vs plain";
  }
}

// Runs our fused kernels (not cuDNN's, path.h) with one kernel family (flash.h) for the scope.
class ScopedFlashKernels {
 public:
  explicit ScopedFlashKernels(FlashKernels kernels) {
    set_attention_path(AttentionPath::flash);
    set_flash_kernels(kernels);
  }
  ~ScopedFlashKernels() {
    set_flash_kernels(FlashKernels::automatic);
    set_attention_path(AttentionPath::automatic);
  }
  ScopedFlashKernels(const ScopedFlashKernels&) = delete;
  ScopedFlashKernels& operator=(const ScopedFlashKernels&) = delete;
};

const char* family_name(FlashKernels kernels) {
  return kernels == FlashKernels::simple ? "simple" : "pipelined";
}

void check_lengths(FlashKernels kernels, const std::vector<std::pair<int64_t, int64_t>>& lengths,
                   uint64_t seed) {
  ScopedFlashKernels scoped(kernels);
  for (const int64_t d : {32, 64, 128}) {
    for (const auto& [l, s] : lengths) {
      EXPECT_EQ(flash_pipelined_applies(l, s), kernels == FlashKernels::pipelined);
      const std::vector<Tensor> in = random_inputs({{2, 2, l, d}, {2, 2, s, d}, {2, 2, s, d}}, seed += 3);
      const std::string what = std::string(family_name(kernels)) + " D " + std::to_string(d) + " L " +
                               std::to_string(l) + " S " + std::to_string(s);
      for (const bool causal : {false, true}) check_all(in, causal, what);
    }
  }
}

// (L, S): tiles of 64 and 128 rows cut partially; L != S both ways; single-row and single-key cases.
const std::vector<std::pair<int64_t, int64_t>> kOddLengths = {{1, 1},   {17, 17}, {65, 65}, {197, 197},
                                                              {17, 65}, {65, 17}, {1, 197}, {197, 1}};

TEST(AttentionFlashCuda, SimpleKernelsMatchCpuAndPlainForEveryHeadDimAndOddLengths) {
  LIFTOFF_REQUIRE_CUDA();
  check_lengths(FlashKernels::simple, kOddLengths, 100);
}

TEST(AttentionFlashCuda, PipelinedKernelsMatchCpuAndPlainForEveryHeadDimAndOddLengths) {
  LIFTOFF_REQUIRE_CUDA();
  check_lengths(FlashKernels::pipelined, kOddLengths, 100);
  // Around the pipelined tiles (128 rows, 64 keys per forward step, 64 or 32 queries per backward step): one
  // tile exactly, one row over, several double-buffered steps with a partial last one, keys past the last
  // query (causal blocks without queries), queries past the last key.
  check_lengths(FlashKernels::pipelined, {{128, 128}, {129, 129}, {127, 300}, {300, 127}, {1, 300}, {300, 1}},
                200);
}

TEST(AttentionFlashCuda, AutomaticChoiceKeepsShortRowsOnSimpleKernels) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_FALSE(flash_pipelined_applies(65, 65));  // vit_tiny
  EXPECT_FALSE(flash_pipelined_applies(1024, 65));
  EXPECT_TRUE(flash_pipelined_applies(197, 197));
  EXPECT_TRUE(flash_pipelined_applies(1024, 1024));
  // The automatic choice on shapes of both sides agrees with the CPU (whichever family, or cuDNN, it picks).
  check_all(random_inputs({{2, 2, 65, 64}, {2, 2, 65, 64}, {2, 2, 65, 64}}, 250), true, "auto L 65");
  check_all(random_inputs({{1, 2, 260, 64}, {1, 2, 260, 64}, {1, 2, 260, 64}}, 260), true, "auto L 260");
}

TEST(AttentionFlashCuda, BroadcastBatchDims) {
  LIFTOFF_REQUIRE_CUDA();
  // k/v shared by the heads (multi-query attention), and q without the leading batch dim.
  check_all(random_inputs({{2, 3, 33, 64}, {2, 1, 70, 64}, {2, 1, 70, 64}}, 300), false, "shared k/v");
  check_all(random_inputs({{3, 40, 32}, {2, 1, 40, 32}, {2, 3, 40, 32}}, 310), true, "broadcast q");
}

TEST(AttentionFlashCuda, PermutedProjectionsAsVitTiny) {
  LIFTOFF_REQUIRE_CUDA();
  // q, k, v as vit_tiny makes them: [B, L, H, D] projections permuted to [B, H, L, D] (strided rows), plus a
  // transposed key ([B, H, D, S] -> [B, H, S, D]: last dim not dense, copied once).
  const std::vector<Tensor> in = random_inputs({{2, 65, 3, 64}, {2, 65, 3, 64}, {2, 3, 64, 65}}, 400);
  const auto fn = [](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0].permute({0, 2, 1, 3}), x[1].permute({0, 2, 1, 3}),
                                        x[2].permute({0, 1, 3, 2}));
  };
  for (const Tolerance& t : kHalves) {
    testing::ParityOptions options;
    options.atol = t.atol;
    options.rtol = t.rtol;
    options.cuda_dtype = t.dtype;
    EXPECT_TRUE(testing::cuda_parity(fn, in, options)) << dtype_name(t.dtype);
    EXPECT_TRUE(fused_matches_plain(fn, in, t)) << dtype_name(t.dtype);
  }
}

TEST(AttentionFlashCuda, LongCausalSequence) {
  LIFTOFF_REQUIRE_CUDA();
  // Many key blocks per query block (the online softmax rescales) and many query blocks per key block, in
  // both families; the long one has more tiles than the causal grid has batch entries (longest first).
  for (const FlashKernels kernels : {FlashKernels::simple, FlashKernels::pipelined}) {
    ScopedFlashKernels scoped(kernels);
    check_all(random_inputs({{1, 2, 300, 128}, {1, 2, 300, 128}, {1, 2, 300, 128}}, 500), true,
              std::string(family_name(kernels)) + " L 300");
  }
  ScopedFlashKernels by_length(FlashKernels::automatic);
  check_all(random_inputs({{1, 3, 1030, 64}, {1, 3, 1030, 64}, {1, 3, 1030, 64}}, 510), true, "L 1030");
  check_all(random_inputs({{1, 3, 1030, 64}, {1, 3, 1030, 64}, {1, 3, 1030, 64}}, 520), false, "L 1030");
}

TEST(AttentionFlashCuda, KnobAndUnsupportedCallsTakeThePlainPath) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor q = testing::random_tensor({2, 8, 64}, 1, -1, 1, DType::bf16, Device::cuda());
  EXPECT_TRUE(flash_attention_applies(q, q, q, Tensor(), 0.0));
  EXPECT_FALSE(flash_attention_applies(q.to(Device::cuda(), DType::f32), q, q, Tensor(), 0.0));
  EXPECT_FALSE(flash_attention_applies(q, q, q, Tensor(), 0.1));
  EXPECT_FALSE(flash_attention_applies(q, q, q, Tensor::ones({8, 8}, DType::bf16, Device::cuda()), 0.0));
  const Tensor q48 = testing::random_tensor({2, 8, 48}, 2, -1, 1, DType::bf16, Device::cuda());
  EXPECT_FALSE(flash_attention_applies(q48, q48, q48, Tensor(), 0.0));
  config::ScopedSetting off(config::Knob::attention_fused, "0");
  EXPECT_FALSE(flash_attention_applies(q, q, q, Tensor(), 0.0));
}

void expect_capture_matches_eager(FlashKernels kernels) {
  ScopedFlashKernels scoped(kernels);
  SCOPED_TRACE(family_name(kernels));
  const Tensor q =
      testing::random_tensor({2, 3, 70, 64}, 41, -1, 1, DType::bf16, Device::cuda()).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 3, 90, 64}, 42, -1, 1, DType::bf16, Device::cuda());
  const Tensor v = testing::random_tensor({2, 3, 90, 64}, 43, -1, 1, DType::bf16, Device::cuda());
  ASSERT_TRUE(flash_attention_applies(q, k, v, Tensor(), 0.0));
  const Tensor weights = testing::random_tensor({2, 3, 70, 64}, 44, 0.5, 1.5, DType::bf16, Device::cuda());
  const auto step = [&] {
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    out.backward(weights);
    return out;
  };
  const Tensor eager = step().to(Device::cpu(), DType::f64);
  const Tensor eager_grad = q.grad().to(Device::cpu(), DType::f64);
  q.set_grad(Tensor());
  CudaGraph graph(Device::cuda());
  const Tensor captured = testing::capture_into(graph, step);
  graph.replay();
  EXPECT_TRUE(testing::all_close(captured.to(Device::cpu(), DType::f64), eager, 0, 0));
  // dQ sums key blocks with f32 atomics, whose order may differ between runs: one bf16 rounding apart.
  EXPECT_TRUE(testing::all_close(q.grad().to(Device::cpu(), DType::f64), eager_grad, 1e-2, 1e-2));
}

TEST(AttentionFlashCuda, CapturesInACudaGraph) {
  LIFTOFF_REQUIRE_CUDA();
  expect_capture_matches_eager(FlashKernels::simple);
  expect_capture_matches_eager(FlashKernels::pipelined);
}

}  // namespace
}  // namespace liftoff
