#include "ops/amp/amp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/optimizer_step/optimizer_step.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

Tensor scalar_f32(double value) {
  return Tensor::full({1}, value, DType::f32);
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::vector<Tensor> clones(const std::vector<Tensor>& list) {
  std::vector<Tensor> out;
  for (const Tensor& t : list) out.push_back(t.clone());
  return out;
}

// ---- scale_by
// ----------------------------------------------------------------------------------------------

TEST(ScaleBy, ForwardAndBackward) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 0.25f}, {3}).set_requires_grad(true);
  const Tensor y = scale_by(x, scalar_f32(4.0));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4.f, -8.f, 1.f}));
  y.backward(Tensor::from_vector<float>({1.f, 0.5f, -3.f}, {3}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4.f, 2.f, -12.f}));
}

TEST(ScaleBy, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 5}, 31).set_requires_grad(true);
  const Tensor factor = scalar_f32(-0.375);
  EXPECT_TRUE(
      testing::gradcheck([&](const std::vector<Tensor>& in) { return scale_by(in[0], factor); }, {x}));
}

TEST(ScaleBy, RejectsBadArguments) {
  const Tensor x = Tensor::ones({3});
  EXPECT_THROW(scale_by(x, Tensor::full({1}, 2.0, DType::f64)), DTypeError);
  EXPECT_THROW(scale_by(x, Tensor::full({2}, 2.0)), DTypeError);
  EXPECT_THROW(scale_by(x, Tensor()), ValueError);
  EXPECT_THROW(scale_by(Tensor::ones({3}, DType::i32), scalar_f32(2.0)), DTypeError);
  EXPECT_THROW(scale_by(Tensor(), scalar_f32(2.0)), ValueError);
}

// ---- unscale_and_check
// -------------------------------------------------------------------------------------

// Gradients 8 * v with inv_scale 1/8: the unscaled values are exactly v.
struct Grads {
  std::vector<Tensor> values, scaled;
};
Grads make_grads(const std::vector<Shape>& shapes, uint64_t seed) {
  Grads g;
  for (size_t i = 0; i < shapes.size(); ++i) {
    g.values.push_back(testing::random_tensor(shapes[i], seed + i, -1, 1, DType::f32));
    Tensor s = g.values.back().clone();
    float* p = s.data<float>();
    for (int64_t k = 0; k < s.numel(); ++k) p[k] *= 8.0f;
    g.scaled.push_back(s);
  }
  return g;
}

const std::vector<Shape> kShapes{{3}, {17, 5}, {0}, {200000}, {64, 3, 3}};

TEST(UnscaleAndCheck, UnscalesCleanGradients) {
  Grads g = make_grads(kShapes, 40);
  const Tensor found = scalar_f32(0.0);
  unscale_and_check(g.scaled, scalar_f32(0.125), found);
  EXPECT_EQ(found.item(), 0.0);
  for (size_t i = 0; i < kShapes.size(); ++i) EXPECT_TRUE(bit_identical(g.scaled[i], g.values[i])) << i;
}

TEST(UnscaleAndCheck, FindsInfAndNaNInAnyTensor) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    Grads g = make_grads(kShapes, 50);
    g.scaled[3].data<float>()[199999] = bad;  // the last element of a tensor that is not the first
    const Tensor found = scalar_f32(0.0);
    unscale_and_check(g.scaled, scalar_f32(0.125), found);
    EXPECT_EQ(found.item(), 1.0) << bad;
    // Everything is still unscaled, as in PyTorch (the step is skipped later, not here).
    EXPECT_TRUE(bit_identical(g.scaled[4], g.values[4]));
    EXPECT_EQ(g.scaled[3].data<float>()[0], g.values[3].data<float>()[0]);
  }
}

TEST(UnscaleAndCheck, FoundInfIsNeverCleared) {
  Grads g = make_grads(kShapes, 60);
  const Tensor found = scalar_f32(1.0);
  unscale_and_check(g.scaled, scalar_f32(0.125), found);
  EXPECT_EQ(found.item(), 1.0);
}

TEST(UnscaleAndCheck, MixedDtypesAndUndefinedEntries) {
  const Tensor f64 = Tensor::from_vector<double>({2.0, -6.0}, {2});
  const Tensor f16 = Tensor::from_vector<float>({1024.f, -0.5f, 65504.f}, {3}).to(DType::f16);
  const Tensor bf16 = Tensor::from_vector<float>({3.f, 1e30f}, {2}).to(DType::bf16);
  const Tensor found = scalar_f32(0.0);
  unscale_and_check({f64, Tensor(), f16, bf16}, scalar_f32(0.5), found);
  EXPECT_EQ(found.item(), 0.0);
  EXPECT_EQ(f64.to_vector<double>(), (std::vector<double>{1.0, -3.0}));
  EXPECT_EQ(f16.to_vector<float>(), (std::vector<float>{512.f, -0.25f, 32752.f}));
  EXPECT_EQ(bf16.to_vector<float>()[0], 1.5f);
  // An f16 inf (what an overflowing half backward produces) is found.
  const Tensor overflow = Tensor::from_vector<float>({1.f, 70000.f}, {2}).to(DType::f16);
  unscale_and_check({overflow}, scalar_f32(0.5), found);
  EXPECT_EQ(found.item(), 1.0);
}

TEST(UnscaleAndCheck, RejectsBadArguments) {
  const Tensor g = Tensor::ones({4});
  const Tensor inv = scalar_f32(0.5), found = scalar_f32(0.0);
  EXPECT_THROW(unscale_and_check({Tensor::ones({2, 3}).permute({1, 0})}, inv, found), ValueError);
  EXPECT_THROW(unscale_and_check({Tensor::ones({2}, DType::i32)}, inv, found), DTypeError);
  EXPECT_THROW(unscale_and_check({g}, Tensor::full({1}, 0.5, DType::f64), found), DTypeError);
  EXPECT_THROW(unscale_and_check({g}, inv, Tensor::zeros({2})), DTypeError);
  EXPECT_THROW(unscale_and_check({g}, Tensor(), found), ValueError);
}

TEST(InverseScale, ComputesReciprocalInF64) {
  const Tensor inv = scalar_f32(0.0);
  inverse_scale(scalar_f32(65536.0), inv);
  EXPECT_EQ(inv.item(), 1.0 / 65536.0);
  inverse_scale(scalar_f32(3.0), inv);
  EXPECT_EQ(static_cast<float>(inv.item()), static_cast<float>(1.0 / 3.0));
  EXPECT_THROW(inverse_scale(scalar_f32(3.0), Tensor::zeros({1}, DType::f64)), DTypeError);
}

// ---- update_scale
// ------------------------------------------------------------------------------------------

struct ScalerState {
  Tensor scale = scalar_f32(1024.0);
  Tensor tracker;
  Tensor skipped = Tensor::zeros({1}, DType::i64);
  explicit ScalerState(DType tracker_dtype) : tracker(Tensor::zeros({1}, tracker_dtype)) {}
  void update(bool inf, int64_t interval = 3) {
    update_scale(scale, tracker, scalar_f32(inf ? 1.0 : 0.0), 2.0, 0.5, interval, skipped);
  }
};

TEST(UpdateScale, GrowsAfterIntervalBacksOffAndResetsTracker) {
  for (DType tracker_dtype : {DType::i32, DType::i64}) {
    ScalerState s(tracker_dtype);
    s.update(false);
    s.update(false);
    EXPECT_EQ(s.scale.item(), 1024.0);
    EXPECT_EQ(s.tracker.item(), 2.0);
    s.update(false);  // the third clean step in a row grows the scale
    EXPECT_EQ(s.scale.item(), 2048.0);
    EXPECT_EQ(s.tracker.item(), 0.0);
    s.update(false);
    s.update(false);
    s.update(true);  // an inf halves the scale and restarts the count
    EXPECT_EQ(s.scale.item(), 1024.0);
    EXPECT_EQ(s.tracker.item(), 0.0);
    EXPECT_EQ(s.skipped.item(), 1.0);
    s.update(false);
    s.update(false);
    EXPECT_EQ(s.scale.item(), 1024.0) << "growth needs interval clean steps after the backoff";
    s.update(false);
    EXPECT_EQ(s.scale.item(), 2048.0);
    EXPECT_EQ(s.skipped.item(), 1.0);
  }
}

TEST(UpdateScale, NaNFlagCountsAsFoundAndOverflowKeepsScale) {
  ScalerState s(DType::i32);
  update_scale(s.scale, s.tracker, scalar_f32(std::nan("")), 2.0, 0.5, 3, s.skipped);
  EXPECT_EQ(s.scale.item(), 512.0);
  EXPECT_EQ(s.skipped.item(), 1.0);
  const Tensor big = scalar_f32(3e38);
  update_scale(big, s.tracker, scalar_f32(0.0), 2.0, 0.5, 1);
  EXPECT_EQ(static_cast<float>(big.item()), 3e38f) << "growth to inf is not applied";
  EXPECT_EQ(s.tracker.item(), 0.0);
}

TEST(UpdateScale, StaticScaleNeverChanges) {
  ScalerState s(DType::i32);
  for (int i = 0; i < 5; ++i) update_scale(s.scale, s.tracker, scalar_f32(i == 2), 1.0, 1.0, 2, s.skipped);
  EXPECT_EQ(s.scale.item(), 1024.0);
  EXPECT_EQ(s.skipped.item(), 1.0);
}

TEST(UpdateScale, RejectsBadArguments) {
  const Tensor scale = scalar_f32(1.0), tracker = Tensor::zeros({1}, DType::i32), found = scalar_f32(0.0);
  EXPECT_THROW(update_scale(scale, scalar_f32(0.0), found, 2.0, 0.5, 10), DTypeError);
  EXPECT_THROW(update_scale(Tensor::full({1}, 1.0, DType::f64), tracker, found, 2.0, 0.5, 10), DTypeError);
  EXPECT_THROW(update_scale(scale, tracker, found, 2.0, 0.5, 0), ValueError);
  EXPECT_THROW(update_scale(scale, tracker, found, std::nan(""), 0.5, 10), ValueError);
  EXPECT_THROW(update_scale(scale, tracker, found, 2.0, 0.0, 10), ValueError);
  EXPECT_THROW(update_scale(scale, tracker, found, 2.0, 0.5, 10, Tensor::zeros({1}, DType::i32)), DTypeError);
}

// ---- skip flag of the fused optimizer steps --------------------------------------------------------------

const std::vector<Shape> kParamShapes{{5}, {70000}, {3, 3}};

std::vector<Tensor> random_list(uint64_t seed) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < kParamShapes.size(); ++i) {
    out.push_back(testing::random_tensor(kParamShapes[i], seed + i, -1, 1, DType::f32));
  }
  return out;
}

TEST(OptimizerSkipFlag, SgdLeavesParamsAndMomentumBitIdentical) {
  const std::vector<Tensor> params = random_list(70), grads = random_list(80), buffers = random_list(90);
  const std::vector<Tensor> params0 = clones(params), buffers0 = clones(buffers);
  SgdHyper h;
  h.lr = 0.1;
  h.momentum = 0.9;
  h.weight_decay = 1e-4;
  for (double flag : {1.0, std::nan(""), -2.0}) {
    sgd_step(params, grads, buffers, h, scalar_f32(flag));
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(bit_identical(params[i], params0[i])) << "flag " << flag << " tensor " << i;
      EXPECT_TRUE(bit_identical(buffers[i], buffers0[i])) << "flag " << flag << " tensor " << i;
    }
  }
  // A zero flag is an ordinary step.
  const std::vector<Tensor> ref_params = clones(params), ref_buffers = clones(buffers);
  sgd_step(ref_params, grads, ref_buffers, h);
  sgd_step(params, grads, buffers, h, scalar_f32(0.0));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(bit_identical(params[i], params0[i]));
    EXPECT_TRUE(bit_identical(params[i], ref_params[i]));
    EXPECT_TRUE(bit_identical(buffers[i], ref_buffers[i]));
  }
}

TEST(OptimizerSkipFlag, AdamWLeavesParamsAndMomentsBitIdentical) {
  const std::vector<Tensor> params = random_list(100), grads = random_list(110);
  const std::vector<Tensor> m = random_list(120), v = random_list(130);
  for (const Tensor& t : v) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::abs(p[i]);
  }
  const std::vector<Tensor> params0 = clones(params), m0 = clones(m), v0 = clones(v);
  AdamWHyper h;
  h.step = 3;
  adamw_step(params, grads, m, v, h, scalar_f32(1.0));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(bit_identical(params[i], params0[i])) << i;
    EXPECT_TRUE(bit_identical(m[i], m0[i])) << i;
    EXPECT_TRUE(bit_identical(v[i], v0[i])) << i;
  }
  adamw_step(params0, grads, m0, v0, h);
  adamw_step(params, grads, m, v, h, scalar_f32(0.0));
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(bit_identical(params[i], params0[i])) << i;
}

TEST(OptimizerSkipFlag, RejectsBadFlag) {
  const Tensor p = Tensor::zeros({3}), g = Tensor::ones({3});
  SgdHyper h;
  EXPECT_THROW(sgd_step({p}, {g}, {}, h, Tensor::zeros({1}, DType::f64)), DTypeError);
  EXPECT_THROW(sgd_step({p}, {g}, {}, h, Tensor::zeros({2})), DTypeError);
  AdamWHyper a;
  EXPECT_THROW(
      adamw_step({p}, {g}, {Tensor::zeros({3})}, {Tensor::zeros({3})}, a, Tensor::zeros({1}, DType::i32)),
      DTypeError);
}

}  // namespace
}  // namespace liftoff
