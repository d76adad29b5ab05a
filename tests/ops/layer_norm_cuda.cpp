// CUDA layer_norm against the CPU reference: warp-per-row and block-per-row kernels, vector and scalar
// loads, the two-stage weight/bias gradient over many rows, f32/f64/f16/bf16, autocast, and the fused bf16
// backward over enough rows that its groups prefetch rows ahead.
#include <gtest/gtest.h>

#include "ops/layer_norm/layer_norm.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x, normalized;
  // The weight/bias gradients sum over the rows; with many rows the 16-bit rounding of the output gradient
  // (the CPU side keeps it in f32) grows past any useful tolerance, so such cases run in f32/f64 only.
  bool reduced_precision_too = true;
};
// cols 7 (scalar loads), 64 (vector loads), 1029 and 1536 (a block per row; scalar / vector), 300 rows (the
// column reduction in several chunks).
const std::vector<Case> kCases = {{{5, 7}, {7}},
                                  {{3, 4, 64}, {64}},
                                  {{4, 1029}, {1029}},
                                  {{3, 2, 768}, {2, 768}},
                                  {{300, 40}, {40}, false}};

// Inputs are rounded to the device dtype first, so the CPU reference sees the values the device sees.
::testing::AssertionResult parity(const Case& c, DType dtype, double atol, double rtol, bool affine = true) {
  const DType reference = dtype == DType::f64 ? DType::f64 : DType::f32;
  auto input = [&](const Shape& shape, uint64_t seed, double low, double high) {
    return testing::random_tensor(shape, seed, low, high, reference)
        .to(dtype)
        .to(reference)
        .set_requires_grad(true);
  };
  const Tensor x = input(c.x, 1, -2, 3);
  const Tensor w = affine ? input(c.normalized, 2, 0.5, 1.5) : Tensor();
  const Tensor b = affine ? input(c.normalized, 3, -1, 1) : Tensor();
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  const Shape normalized = c.normalized;
  return testing::cuda_parity(
      [normalized](const std::vector<Tensor>& in) { return layer_norm(in[0], normalized, in[1], in[2]); },
      {x, w, b}, options);
}

TEST(LayerNormCuda, MatchesCpuF32) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) EXPECT_TRUE(parity(c, DType::f32, 1e-4, 1e-4)) << shape_str(c.x);
  EXPECT_TRUE(parity(kCases[1], DType::f32, 1e-4, 1e-4, /*affine=*/false));
}

TEST(LayerNormCuda, MatchesCpuF64) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) EXPECT_TRUE(parity(c, DType::f64, 1e-10, 1e-10)) << shape_str(c.x);
}

TEST(LayerNormCuda, MatchesCpuF16) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, DType::f16, 2e-2, 2e-2)) << shape_str(c.x);
  }
}

TEST(LayerNormCuda, MatchesCpuBF16) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, DType::bf16, 6e-2, 5e-2)) << shape_str(c.x);
  }
}

// The fused backward over many rows in bf16 (each group strides over several rows, prefetching the row after
// next into L2): every input, the output gradient included, is rounded to bf16 first, so the CPU reference
// (f32) sees the device's values and only the device's output rounding and f32 sums differ. Shapes: 1024,
// 2048 and 4096 columns (tiles of 128 / 256 / 256 threads), 64 (a group of 8), 1001 (scalar loads: no
// prefetch), and a view one element into its storage (misaligned: scalar loads).
TEST(LayerNormCuda, Bf16BackwardOverManyRowsMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  struct Rows {
    int64_t rows, cols;
    bool misaligned;
  };
  for (const Rows& c : {Rows{3000, 1024, false}, Rows{2100, 2048, false}, Rows{1000, 4096, false},
                        Rows{40000, 64, false}, Rows{2500, 1001, false}, Rows{2500, 1024, true}}) {
    auto rounded = [](const Shape& shape, uint64_t seed, double low, double high) {
      return testing::random_tensor(shape, seed, low, high, DType::f32).to(DType::bf16).to(DType::f32);
    };
    const int64_t offset = c.misaligned ? 1 : 0;
    const Tensor storage = rounded({c.rows * c.cols + offset}, 11, -2, 3);
    const Tensor w = rounded({c.cols}, 12, 0.5, 1.5), b = rounded({c.cols}, 13, -1, 1);
    const Tensor gy = rounded({c.rows, c.cols}, 14, -1, 1);
    auto run = [&](Device device, DType dtype) {
      const Tensor xs = storage.to(device, dtype).detach();
      Tensor xl = xs.slice(0, offset, offset + c.rows * c.cols).view({c.rows, c.cols});
      xl.set_requires_grad(true);
      Tensor wl = w.to(device, dtype).detach(), bl = b.to(device, dtype).detach();
      wl.set_requires_grad(true);
      bl.set_requires_grad(true);
      const Tensor y = layer_norm(xl, {c.cols}, wl, bl);
      y.backward(gy.to(device, dtype));
      std::vector<Tensor> out;
      for (const Tensor& t : {y, xl.grad(), wl.grad(), bl.grad()})
        out.push_back(t.to(Device::cpu(), DType::f32));
      return out;
    };
    const std::vector<Tensor> expected = run(Device::cpu(), DType::f32);
    const std::vector<Tensor> actual = run(Device::cuda(0), DType::bf16);
    const char* names[] = {"y", "grad x", "grad weight", "grad bias"};
    for (size_t k = 0; k < expected.size(); ++k)
      EXPECT_TRUE(testing::all_close(actual[k], expected[k], 3e-2, 2e-2))
          << names[k] << " " << c.rows << "x" << c.cols << (c.misaligned ? " misaligned" : "");
    // Deterministic: the same bits from a second run.
    const std::vector<Tensor> again = run(Device::cuda(0), DType::bf16);
    EXPECT_EQ(again[2].to_vector<float>(), actual[2].to_vector<float>()) << c.rows << "x" << c.cols;
    EXPECT_EQ(again[1].to_vector<float>(), actual[1].to_vector<float>()) << c.rows << "x" << c.cols;
  }
}

TEST(LayerNormCuda, AutocastComputesInF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 32}, 5, -1, 1, DType::f32);
  const Tensor w = testing::random_tensor({32}, 6, 0.5, 1.5, DType::f32);
  const Tensor x_half = x.to(Device::cuda(0), DType::bf16);
  AutocastGuard autocast(DType::bf16);
  const Tensor y = layer_norm(x_half, {32}, w.to(Device::cuda(0)));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu()),
                                 layer_norm(x_half.to(Device::cpu(), DType::f32), {32}, w), 1e-5, 1e-5));
}

}  // namespace
}  // namespace liftoff
