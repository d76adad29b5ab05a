// The FLOP counter (runtime/profile/flops.h) against hand counts: 2*M*N*K per product for conv2d (grouped
// too), conv_transpose2d, linear, matmul, bmm and attention; nothing outside a live counter; and the peak
// table and MFU arithmetic of the report.
#include "runtime/profile/flops.h"

#include <gtest/gtest.h>

#include "ops/ops.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

Tensor rnd(const Shape& shape, uint64_t seed) {
  return testing::random_tensor(shape, seed, -1, 1, DType::f32);
}

// conv(3->4, 3x3, pad 1) -> relu -> max pool 2 -> conv(4->8, 3x3, stride 2, pad 1, groups 2) -> flatten ->
// linear(32->10), on [2, 3, 8, 8].
Tensor small_conv_net(const Tensor& x) {
  Tensor y = conv2d(x, rnd({4, 3, 3, 3}, 2), rnd({4}, 3), 1, 1);
  y = max_pool2d(relu(y), 2, 2);
  y = conv2d(y, rnd({8, 2, 3, 3}, 4), Tensor(), 2, 1, 1, 2);
  return linear(flatten(y, 1), rnd({10, 32}, 5), rnd({10}, 6));
}

TEST(Flops, SmallConvNetMatchesAHandCount) {
  const Tensor x = rnd({2, 3, 8, 8}, 1);
  // conv1: 2 * (N*H*W = 2*8*8) outputs * 4 filters * (3*3*3) taps = 27648.
  // conv2 (groups 2): [2, 4, 4, 4] -> [2, 8, 2, 2]: 2 * (2*2*2) * 8 * (2*3*3) = 2304.
  // linear: 2 * 2 rows * 10 * 32 = 1280. Bias, ReLU and pooling are not counted.
  const double expected = 27648 + 2304 + 1280;
  FlopCounter counter;
  EXPECT_TRUE(counting_flops());
  const Tensor y = small_conv_net(x);
  EXPECT_EQ(y.shape(), Shape({2, 10}));
  EXPECT_DOUBLE_EQ(counter.flops(), expected);
  EXPECT_DOUBLE_EQ(counter.flops() / 2, 15616.0);  // per image
}

TEST(Flops, ProductsAndAttention) {
  FlopCounter counter;
  matmul(rnd({3, 4, 5}, 1), rnd({5, 6}, 2));  // folded: [12, 5] @ [5, 6]
  EXPECT_DOUBLE_EQ(counter.flops(), 2.0 * 12 * 6 * 5);
  FlopCounter inner;  // nested counters each see what happens inside them
  bmm(rnd({2, 3, 4}, 3), rnd({2, 4, 5}, 4));
  EXPECT_DOUBLE_EQ(inner.flops(), 2.0 * 3 * 5 * 4 * 2);
  EXPECT_DOUBLE_EQ(counter.flops(), 720.0 + 240.0);
  // Attention, 2 heads, Lq 4, Lk 6, E 8, Ev 5: q k^T then probabilities @ v.
  FlopCounter attention;
  scaled_dot_product_attention(rnd({1, 2, 4, 8}, 5), rnd({1, 2, 6, 8}, 6), rnd({1, 2, 6, 5}, 7));
  EXPECT_DOUBLE_EQ(attention.flops(), 2.0 * 4 * 6 * 8 * 2 + 2.0 * 4 * 5 * 6 * 2);
  // The adjoint of conv2d([1, 3, 11, 11], [4, 3, 3, 3], stride 2) counts as that convolution.
  FlopCounter transposed;
  const Tensor y = conv_transpose2d(rnd({1, 4, 5, 5}, 8), rnd({4, 3, 3, 3}, 9), Tensor(), 2);
  EXPECT_EQ(y.shape(), Shape({1, 3, 11, 11}));
  EXPECT_DOUBLE_EQ(transposed.flops(), 2.0 * 25 * 4 * 27);
}

TEST(Flops, NothingIsCountedWithoutACounterOrInBackward) {
  EXPECT_FALSE(counting_flops());
  add_flops(5.0);  // no counter: a no-op
  Tensor w = rnd({4, 3, 3, 3}, 2);
  w.set_requires_grad(true);
  Tensor y;
  double forward = 0;
  {
    FlopCounter counter;
    y = conv2d(rnd({1, 3, 6, 6}, 1), w, Tensor(), 1, 1);
    forward = counter.flops();
  }
  EXPECT_DOUBLE_EQ(forward, 2.0 * 36 * 4 * 27);
  FlopCounter later;
  EXPECT_DOUBLE_EQ(later.flops(), 0.0);
  {
    NoGradGuard no_grad;  // counting does not depend on autograd
    conv2d(rnd({1, 3, 6, 6}, 1), w, Tensor(), 1, 1);
  }
  EXPECT_DOUBLE_EQ(later.flops(), forward);
}

TEST(Flops, PeakTableAndMfu) {
  EXPECT_EQ(peak_tflops("NVIDIA H200", "bf16"), 989.0);
  EXPECT_EQ(peak_tflops("NVIDIA H100 80GB HBM3", "fp16"), 989.0);
  EXPECT_EQ(peak_tflops("NVIDIA H100 SXM5 80GB", "tf32"), 494.0);
  EXPECT_EQ(peak_tflops("NVIDIA H200", "fp32"), 67.0);
  EXPECT_FALSE(peak_tflops("NVIDIA H100 PCIe", "bf16").has_value());  // other clocks: no guess
  EXPECT_FALSE(peak_tflops("NVIDIA H200 NVL", "bf16").has_value());
  EXPECT_FALSE(peak_tflops("NVIDIA A100-SXM4-80GB", "bf16").has_value());
  EXPECT_FALSE(peak_tflops("", "bf16").has_value());
  EXPECT_EQ(peak_precision("cuda:0", "bf16"), "bf16");
  EXPECT_EQ(peak_precision("cuda:1", "off"), "tf32");
  EXPECT_EQ(peak_precision("cpu", "off"), "fp32");

  // 1 GFLOP/image forward at 100,000 images/s: 3e9 * 1e5 = 300 TFLOP/s, 30.3% of 989.
  const ComputeRate r = compute_rate(1e9, 1e5, "NVIDIA H200", "bf16");
  EXPECT_DOUBLE_EQ(r.achieved_tflops, 300.0);
  ASSERT_TRUE(r.mfu.has_value());
  EXPECT_NEAR(*r.mfu, 300.0 / 989.0, 1e-12);
  const std::string text = compute_rate_text(r);
  EXPECT_NE(text.find("1 GFLOP/image"), std::string::npos) << text;
  EXPECT_NE(text.find("300.0 TFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("MFU 30.3%"), std::string::npos) << text;
  const ComputeRate unknown = compute_rate(1e9, 1e5, "Some GPU", "bf16");
  EXPECT_FALSE(unknown.mfu.has_value());
  EXPECT_NE(compute_rate_text(unknown).find("MFU n/a"), std::string::npos);
  EXPECT_EQ(compute_rate_text(compute_rate(0, 1e5, "NVIDIA H200", "bf16")), "");
  // Slow runs (the CPU) in GFLOP/s: 62 MFLOP/image at 90 images/s = 16.7 GFLOP/s.
  const std::string cpu = compute_rate_text(compute_rate(62e6, 90, "", "fp32"));
  EXPECT_NE(cpu.find("16.7 GFLOP/s achieved"), std::string::npos) << cpu;
}

}  // namespace
}  // namespace liftoff
