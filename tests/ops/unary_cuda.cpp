// CUDA parity of the unary family: every op of tests/ops/unary_cases.h against the f64 CPU reference, in f32,
// f64, f16 and bf16, forward and backward; the vectorised path with a tail, the scalar path of a misaligned
// view, channels-last and permuted inputs, a large tensor, and the autocast rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "ops/reduce/reduce.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"
#include "tests/ops/unary_cases.h"

namespace liftoff {
namespace {

using testing::unary_cases;
using testing::UnaryCase;

// Per storage dtype: 16-bit outputs carry a rounding of 2^-11 (f16) or 2^-8 (bf16) relative, and backward
// rounds the saved tensor, the incoming gradient and the result; f32 math is a few ulp from the f64
// reference.
testing::ParityOptions tolerance(DType dtype) {
  testing::ParityOptions options;
  options.cuda_dtype = dtype;
  const bool f64 = dtype == DType::f64, f16 = dtype == DType::f16, bf16 = dtype == DType::bf16;
  options.atol = f64 ? 1e-12 : (f16 ? 3e-3 : (bf16 ? 2e-2 : 1e-5));
  options.rtol = f64 ? 1e-10 : (f16 ? 5e-3 : (bf16 ? 4e-2 : 1e-5));
  return options;
}

// An f64 CPU input holding exactly the values the device sees in `dtype`, so only the op's own error is
// compared.
Tensor device_exact_sample(const UnaryCase& c, const Shape& shape, uint64_t seed, DType dtype) {
  return testing::unary_sample(c, shape, seed).to(dtype).to(DType::f64).set_requires_grad(true);
}

using CaseAndDType = std::tuple<size_t, DType>;

class UnaryCuda : public ::testing::TestWithParam<CaseAndDType> {
 protected:
  const UnaryCase& op_case() const { return unary_cases()[std::get<0>(GetParam())]; }
  DType dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(UnaryCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const UnaryCase& c = op_case();
  // 555 elements: whole 16-byte packs plus a tail for every dtype.
  const Tensor x = device_exact_sample(c, {3, 37, 5}, 31, dtype());
  EXPECT_TRUE(testing::cuda_parity([&c](const std::vector<Tensor>& in) { return c.op(in[0]); }, {x},
                                   tolerance(dtype())));
}

TEST_P(UnaryCuda, MatchesCpuOnMisalignedView) {
  LIFTOFF_REQUIRE_CUDA();
  const UnaryCase& c = op_case();
  // A contiguous view one element into its storage: not 16-byte aligned, so the scalar kernel runs.
  const Tensor x = device_exact_sample(c, {301}, 32, dtype());
  EXPECT_TRUE(testing::cuda_parity(
      [&c](const std::vector<Tensor>& in) { return c.op(in[0].slice(0, 1, in[0].size(0))); }, {x},
      tolerance(dtype())));
}

INSTANTIATE_TEST_SUITE_P(All, UnaryCuda,
                         ::testing::Combine(::testing::Range<size_t>(0, unary_cases().size()),
                                            ::testing::Values(DType::f32, DType::f64, DType::f16,
                                                              DType::bf16)),
                         [](const ::testing::TestParamInfo<CaseAndDType>& info) {
                           return unary_cases()[std::get<0>(info.param)].name + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

const UnaryCase& find_case(const std::string& name) {
  for (const UnaryCase& c : unary_cases()) {
    if (c.name == name) return c;
  }
  throw ValueError("no unary case " + name);
}

TEST(UnaryCudaLayout, ChannelsLastInputStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  for (const char* name : {"sigmoid", "gelu", "clamp", "hardswish"}) {
    SCOPED_TRACE(name);
    const UnaryCase& c = find_case(name);
    const Tensor cpu = testing::unary_sample(c, {2, 3, 4, 5}, 33).to(DType::f32).set_requires_grad(true);
    Tensor dev = Tensor::empty(cpu.shape(), DType::f32, Device::cuda(0), MemoryFormat::channels_last);
    dev.copy_(cpu.detach());
    dev.set_requires_grad(true);
    const Tensor y = c.op(dev);
    EXPECT_TRUE(y.is_channels_last());
    EXPECT_TRUE(testing::all_close(y.to(Device::cpu()), c.op(cpu), 1e-6, 1e-5));
    const Tensor weights = testing::random_tensor(cpu.shape(), 34, 0.5, 1.5, DType::f32);
    c.op(cpu).backward(weights);
    y.backward(weights.to(Device::cuda(0)));
    EXPECT_TRUE(dev.grad().is_channels_last());
    EXPECT_TRUE(testing::all_close(dev.grad().to(Device::cpu()), cpu.grad(), 1e-6, 1e-5));
  }
}

TEST(UnaryCudaLayout, PermutedInputIsMadeContiguous) {
  LIFTOFF_REQUIRE_CUDA();
  const UnaryCase& c = find_case("silu");
  const Tensor x = testing::unary_sample(c, {6, 5, 7}, 35).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity(
      [&c](const std::vector<Tensor>& in) {
        const Tensor y = c.op(in[0].permute({2, 0, 1}));
        EXPECT_TRUE(y.is_contiguous());
        return y;
      },
      {x}, tolerance(DType::f32)));
}

TEST(UnaryCudaLarge, ManyBlocksInHalf) {
  LIFTOFF_REQUIRE_CUDA();
  const UnaryCase& c = find_case("gelu_tanh");
  const int64_t n = (int64_t{1} << 22) + 5;
  const Tensor x = testing::random_tensor({n}, 36, -4, 4, DType::f32).to(DType::f16);
  const Tensor y = c.op(x.to(Device::cuda(0)));
  EXPECT_EQ(y.dtype(), DType::f16);
  const Tensor expected = c.op(x.to(DType::f32));
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), expected, 3e-3, 5e-3));
}

// 16-bit gelu (erf form) computes through the erfc polynomial (functors.h, GeluHalf): every finite bf16
// value (and an f16 sweep), through the 16-byte pack path, the tail, and the scalar path of a view one
// element in, is within the 16-bit rounding of the exact value (f64 erfc, no tail cancellation).
TEST(UnaryCudaGelu, HalfStorageIsWithinRoundingOfTheExactErfForm) {
  LIFTOFF_REQUIRE_CUDA();
  std::vector<float> values;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint32_t word = bits << 16;
    float v = 0.0f;
    std::memcpy(&v, &word, sizeof(v));
    if (std::isfinite(v)) values.push_back(v);
  }
  std::vector<float> sweep;
  for (int i = -40000; i <= 40000; ++i) sweep.push_back(static_cast<float>(i) * 5e-4f);  // [-20, 20]
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::vector<float>& source = dt == DType::bf16 ? values : sweep;
    const auto n = static_cast<int64_t>(source.size());
    const Tensor x = Tensor::from_vector<float>(source, {n}).to(Device::cuda(0), dt);
    const std::vector<double> exact_in = x.to(Device::cpu(), DType::f64).to_vector<double>();
    const double half_ulp = dt == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    const double floor = dt == DType::bf16 ? 1e-37 : 3e-8;  // below the smallest normal value
    for (int64_t offset : {0, 1}) {  // 16-byte packs with a tail (n % 8 != 0), then scalar loads
      const std::vector<double> got =
          gelu(x.slice(0, offset, n)).to(Device::cpu(), DType::f64).to_vector<double>();
      int bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double v = exact_in[i + static_cast<size_t>(offset)];
        const double expected = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
        const double error = std::fabs(got[i] - expected);
        if (!(error <= (half_ulp + 1e-4) * std::fabs(expected) + floor) && bad++ < 5) {
          ADD_FAILURE() << dtype_name(dt) << " gelu(" << v << ") = " << got[i] << ", exact " << expected;
        }
      }
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " offset " << offset;
    }
  }
}

// PyTorch's CUDA autocast runs exp, log, rsqrt and softplus in f32; the others keep the input's dtype.
TEST(UnaryCudaAutocast, Float32OpsUpcastHalfInputs) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 8}, 37, 0.5, 2.0, DType::f32)
                       .to(Device::cuda(0), DType::bf16)
                       .set_requires_grad(true);
  AutocastGuard autocast(DType::bf16);
  for (const char* name : {"exp", "log", "rsqrt", "softplus"}) {
    SCOPED_TRACE(name);
    const UnaryCase& c = find_case(name);
    const Tensor y = c.op(x);
    EXPECT_EQ(y.dtype(), DType::f32);
    // The f32 result is the op on the (exact) bf16 values, computed in f32.
    EXPECT_TRUE(
        testing::all_close(y.to(Device::cpu()), c.op(x.detach().to(Device::cpu(), DType::f32)), 1e-6, 1e-5));
    x.set_grad(Tensor());
    sum(y).backward();
    EXPECT_EQ(x.grad().dtype(), DType::bf16);
  }
  EXPECT_EQ(find_case("sigmoid").op(x).dtype(), DType::bf16);
  EXPECT_EQ(find_case("exp").op(x.detach().to(DType::f32)).dtype(), DType::f32);
}

}  // namespace
}  // namespace liftoff
