#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/loss/loss.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

using LossFn = std::function<Tensor(const std::vector<Tensor>&, const std::string&)>;

// Target values in [target_lo, target_hi), or (offset) input +- [0.1, 1): then the rounding of half inputs
// cannot flip the sign of input - target, where l1's gradient jumps.
struct PointwiseCase {
  const char* name;
  LossFn fn;
  double target_lo, target_hi;
  bool offset = false;
};

Tensor target_for(const PointwiseCase& c, const Tensor& x, DType dt) {
  if (!c.offset) return testing::random_tensor(x.shape(), 2, c.target_lo, c.target_hi, dt);
  std::vector<double> v = x.to_vector<double>();
  const std::vector<double> u = testing::random_tensor(x.shape(), 2, 0.1, 1).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] += i % 2 ? u[i] : -u[i];
  return Tensor::from_vector<double>(v, x.shape()).to(dt);
}

std::vector<PointwiseCase> pointwise_cases() {
  return {
      {"mse", [](const auto& in, const auto& r) { return mse_loss(in[0], in[1], r); }, 0, 0, true},
      {"l1", [](const auto& in, const auto& r) { return l1_loss(in[0], in[1], r); }, 0, 0, true},
      {"smooth_l1", [](const auto& in, const auto& r) { return smooth_l1_loss(in[0], in[1], r, 0.5); }, 0, 0,
       true},
      {"huber", [](const auto& in, const auto& r) { return huber_loss(in[0], in[1], r, 0.5); }, 0, 0, true},
      {"bce_logits",
       [](const auto& in, const auto& r) {
         return binary_cross_entropy_with_logits(in[0], in[1], in[2], r, in[3]);
       },
       0, 1},
      {"kl_div", [](const auto& in, const auto& r) { return kl_div(in[0], in[1], r); }, 0.01, 1},
      {"kl_div_log", [](const auto& in, const auto& r) { return kl_div(in[0], in[1], r, true); }, -3, 0},
  };
}

TEST(LossCuda, PointwiseMatchCpuInAllDtypesAndReductions) {
  LIFTOFF_REQUIRE_CUDA();
  for (const testing::DtypeCase& d : testing::all_dtype_cases(4.0)) {
    const DType dt = d.cpu_dtype();
    const Tensor x = testing::random_tensor({37, 129}, 1, -2, 2, dt).set_requires_grad(true);
    const Tensor w = testing::random_tensor({129}, 3, 0.5, 1.5, dt);
    const Tensor pw = testing::random_tensor({37, 1}, 4, 0.5, 3, dt);
    for (const PointwiseCase& c : pointwise_cases()) {
      const Tensor t = target_for(c, x, dt).set_requires_grad(true);
      for (const std::string r : {"mean", "sum", "none"}) {
        // A sum of ~4800 losses is of order 1e3: its tolerance scales with it.
        testing::ParityOptions o = d.options();
        if (r == "sum") o.atol *= 1e3;
        EXPECT_TRUE(testing::cuda_parity([&](const auto& in) { return c.fn(in, r); }, {x, t, w, pw}, o))
            << c.name << " " << r << " " << d.name();
      }
    }
  }
}

TEST(LossCuda, LargeReductionUsesManyBlocksAndIsDeterministic) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({1100, 1000}, 5, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor t = testing::random_tensor({1100, 1000}, 6, -1, 1, DType::f32);
  EXPECT_TRUE(
      testing::cuda_parity([](const auto& in) { return mse_loss(in[0], in[1]); }, {x, t}, {1e-6, 1e-5}));
  const Tensor xd = x.detach().to(Device::cuda()), td = t.to(Device::cuda());
  const float a = static_cast<float>(l1_loss(xd, td, "sum").item());
  const float b = static_cast<float>(l1_loss(xd, td, "sum").item());
  EXPECT_EQ(a, b);
}

Tensor random_targets(int64_t n, int64_t classes, uint64_t seed, bool with_ignored) {
  const std::vector<double> u = testing::random_tensor({n}, seed, 0, 1).to_vector<double>();
  std::vector<int64_t> t;
  for (size_t i = 0; i < u.size(); ++i)
    t.push_back(with_ignored && i % 7 == 3 ? -100
                                           : static_cast<int64_t>(u[i] * static_cast<double>(classes)));
  return Tensor::from_vector<int64_t>(t, {n});
}

TEST(LossCuda, NllMatchesCpuInAllDtypes) {
  LIFTOFF_REQUIRE_CUDA();
  for (const testing::DtypeCase& d : testing::all_dtype_cases(4.0)) {
    const Tensor x = testing::random_tensor({300, 17}, 7, -4, 0, d.cpu_dtype()).set_requires_grad(true);
    const Tensor t = random_targets(300, 17, 8, true);
    const Tensor w = testing::random_tensor({17}, 9, 0.5, 2, d.cpu_dtype());
    for (const std::string r : {"mean", "sum", "none"}) {
      testing::ParityOptions o = d.options();
      if (r == "sum") o.atol *= 1e3;
      EXPECT_TRUE(testing::cuda_parity([&](const auto& in) { return nll_loss(in[0], in[1], in[2], -100, r); },
                                       {x, t, w}, o))
          << r << " " << d.name();
    }
    // Spatial [N, C, d1, d2] with i32 targets.
    const Tensor xs = testing::random_tensor({4, 5, 3, 6}, 10, -4, 0, d.cpu_dtype()).set_requires_grad(true);
    const Tensor ts = random_targets(72, 5, 11, false).to(DType::i32).view({4, 3, 6});
    EXPECT_TRUE(
        testing::cuda_parity([](const auto& in) { return nll_loss(in[0], in[1]); }, {xs, ts}, d.options()))
        << "spatial " << d.name();
  }
}

TEST(LossCuda, NllBadTargetGivesNanWithoutThrowing) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({3, 4}, DType::f32, Device::cuda());
  const Tensor t = Tensor::from_vector<int64_t>({0, 9, 1}, {3}, Device::cuda());
  EXPECT_TRUE(std::isnan(nll_loss(x, t).item()));
}

TEST(LossCuda, AutocastComputesHalfInputsInF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({64, 33}, 12, -2, 2, DType::f32).to(Device::cuda(), DType::bf16);
  const Tensor t = testing::random_tensor({64, 33}, 13, -2, 2, DType::f32).to(Device::cuda(), DType::bf16);
  const double reference = mse_loss(x.to(DType::f32), t.to(DType::f32)).item();
  Tensor loss;
  {
    AutocastGuard autocast(DType::bf16);
    loss = mse_loss(x, t);
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  EXPECT_NEAR(loss.item(), reference, 1e-6 * std::abs(reference));
  EXPECT_EQ(mse_loss(x, t).dtype(), DType::bf16);  // outside autocast: the input's dtype
}

}  // namespace
}  // namespace liftoff
