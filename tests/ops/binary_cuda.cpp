#include <gtest/gtest.h>

#include "ops/binary/binary.h"
#include "ops/compare/compare.h"
#include "ops/where/where.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

using Fn2 = Tensor (*)(const Tensor&, const Tensor&);

const std::vector<std::pair<const char*, Fn2>>& binary_ops() {
  static const std::vector<std::pair<const char*, Fn2>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b, 0.75); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  return ops;
}

// Same-shape (the vectorised path, with a tail), broadcast (strided path) and 0-d shapes.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> pairs = {
      {{1027}, {1027}}, {{4, 33, 7}, {33, 1}}, {{5, 1, 6}, {1, 4, 1}}, {{}, {3, 5}}, {{8, 16}, {}}};
  return pairs;
}

TEST(BinaryCuda, MatchesCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  for (const auto& [name, fn] : binary_ops()) {
    for (const auto& [sa, sb] : shape_pairs()) {
      // Positive operands keep pow real; values apart keep maximum/minimum away from ties after rounding.
      const Tensor a = testing::random_tensor(sa, 1, 0.5, 1.5, DType::f32).set_requires_grad(true);
      const Tensor b = testing::random_tensor(sb, 2, 0.5, 1.5, DType::f32).set_requires_grad(true);
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        testing::ParityOptions options;
        options.cuda_dtype = dt;
        const bool half = dt == DType::f16 || dt == DType::bf16;
        options.atol = half ? 3e-2 : 1e-5;  // half inputs are rounded to 16 bits, results too
        options.rtol = half ? 3e-2 : 1e-5;
        const bool same = name == std::string("maximum") || name == std::string("minimum");
        if (half && same) options.check_grads = false;  // rounding may create ties the f32 run does not have
        EXPECT_TRUE(testing::cuda_parity(
            [fn = fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, {a, b}, options))
            << name << " " << shape_str(sa) << " " << shape_str(sb) << " " << dtype_name(dt);
      }
    }
  }
}

TEST(BinaryCuda, ScalarFormsAndNonContiguousOperands) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({6, 40}, 3, 0.5, 1.5, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({40, 6}, 4, 0.5, 1.5, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) { return (2.0 - in[0]) * pow(in[0], 1.5) / 3.0 + 4.0 / in[0]; },
      {a}));
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        return mul(in[0].slice(1, 1, 39), in[1].permute({1, 0}).slice(1, 0, 38));
      },
      {a, b}));
}

TEST(BinaryCuda, MisalignedOperandsTakeTheScalarPath) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({4097}, 5, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4097}, 6, -1, 1, DType::f32).set_requires_grad(true);
  // Slices starting one element in: dense, but not 16-byte aligned.
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) { return add(in[0].slice(0, 1, 4097), in[1].slice(0, 0, 4096)); },
      {a, b}));
}

TEST(BinaryCuda, LargeTensorVectorisedPath) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({3, 1 << 20}, 7, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3, 1 << 20}, 8, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }, {a, b}));
}

TEST(BinaryCuda, ChannelsLastStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 8, 5, 5}, 9, -1, 1, DType::f32, Device::cuda())
                       .contiguous(MemoryFormat::channels_last);
  const Tensor bias = testing::random_tensor({1, 8, 1, 1}, 10, -1, 1, DType::f32, Device::cuda());
  const Tensor y = add(x, bias);
  EXPECT_TRUE(y.is_channels_last());
  EXPECT_TRUE(mul(x, x).is_channels_last());
  EXPECT_TRUE(gt(x, 0.0).is_channels_last());
  EXPECT_TRUE(
      testing::all_close(y.to(Device::cpu()), add(x.to(Device::cpu()), bias.to(Device::cpu())), 1e-6, 0));
}

TEST(BinaryCuda, PromotionAndAutocastPow) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = Tensor::ones({4}, DType::bf16, Device::cuda());
  const Tensor b = Tensor::ones({4}, DType::f32, Device::cuda());
  EXPECT_EQ(add(a, b).dtype(), DType::f32);
  EXPECT_EQ(add(a, Tensor::ones({4}, DType::f16, Device::cuda())).dtype(), DType::f32);
  EXPECT_EQ(mul(a, 2.0).dtype(), DType::bf16);
  AutocastGuard autocast(DType::bf16);
  EXPECT_EQ(pow(a, 2.0).dtype(), DType::f32);
  EXPECT_EQ(mul(a, a).dtype(), DType::bf16);
}

TEST(CompareCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // Values on a grid of quarters: exact in every dtype, with many ties.
  Tensor a = testing::random_tensor({3, 50}, 11, -3, 3, DType::f32);
  Tensor b = testing::random_tensor({50}, 12, -3, 3, DType::f32);
  a = (a * 4.0).to(DType::i32).to(DType::f32) / 4.0;
  b = (b * 4.0).to(DType::i32).to(DType::f32) / 4.0;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    const Tensor ca = a.to(Device::cuda(), dt);
    const Tensor cb = b.to(Device::cuda(), dt);
    const Tensor ra = a.to(dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt);
    const Tensor rb = b.to(ra.dtype());
    EXPECT_EQ(lt(ca, cb).to_vector<bool>(), lt(ra, rb).to_vector<bool>()) << dtype_name(dt);
    EXPECT_EQ(eq(ca, cb).to_vector<bool>(), eq(ra, rb).to_vector<bool>()) << dtype_name(dt);
    EXPECT_EQ(ge(ca, 0.5).to_vector<bool>(), ge(ra, 0.5).to_vector<bool>()) << dtype_name(dt);
    EXPECT_EQ(logical_not(ca).to_vector<bool>(), logical_not(ra).to_vector<bool>()) << dtype_name(dt);
  }
}

TEST(WhereCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor c = testing::random_tensor({4, 1, 9}, 13, -1, 1, DType::f32);
  const Tensor a = testing::random_tensor({4, 7, 9}, 14, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({7, 1}, 15, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    testing::ParityOptions options;
    options.cuda_dtype = dt;
    options.atol = options.rtol = (dt == DType::f16 || dt == DType::bf16) ? 1e-2 : 1e-6;
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return masked_fill(where(gt(in[0], 0.0), in[1], in[2]), lt(in[2], -0.5), 0.25);
        },
        {c, a, b}, options))
        << dtype_name(dt);
  }
}

}  // namespace
}  // namespace liftoff
