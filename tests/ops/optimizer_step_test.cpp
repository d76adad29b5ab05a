#include "ops/optimizer_step/optimizer_step.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Values below were computed by hand from PyTorch's update rules (torch.optim.SGD / AdamW docs).
TEST(SgdStep, PlainTwoSteps) {
  const Tensor p = Tensor::from_vector<double>({1.0, -2.0}, {2});
  const Tensor g = Tensor::from_vector<double>({0.5, 1.0}, {2});
  SgdHyper h;
  h.lr = 0.1;
  sgd_step({p}, {g}, {}, h);
  sgd_step({p}, {g}, {}, h);
  const std::vector<double> v = p.to_vector<double>();
  EXPECT_NEAR(v[0], 0.9, 1e-15);
  EXPECT_NEAR(v[1], -2.2, 1e-15);
}

TEST(SgdStep, MomentumWeightDecayTwoSteps) {
  for (bool nesterov : {false, true}) {
    const Tensor p = Tensor::from_vector<double>({1.0}, {1});
    const Tensor g = Tensor::from_vector<double>({0.5}, {1});
    const Tensor buf = Tensor::zeros({1}, DType::f64);
    SgdHyper h;
    h.lr = 0.1;
    h.momentum = 0.9;
    h.weight_decay = 0.01;
    h.nesterov = nesterov;
    sgd_step({p}, {g}, {buf}, h);
    // d = 0.5 + 0.01 * 1 = 0.51; buf = 0.51; p = 1 - 0.1 * (nesterov ? 0.51 + 0.9 * 0.51 : 0.51).
    EXPECT_NEAR(p.item(), nesterov ? 0.9031 : 0.949, 1e-14);
    EXPECT_NEAR(buf.item(), 0.51, 1e-14);
    sgd_step({p}, {g}, {buf}, h);
    // d = 0.5 + 0.01 * p1; buf = 0.9 * 0.51 + d.
    EXPECT_NEAR(p.item(), nesterov ? 0.76507411 : 0.852151, 1e-14);
    EXPECT_NEAR(buf.item(), nesterov ? 0.968031 : 0.96849, 1e-14);
  }
}

TEST(AdamWStep, TwoStepsWithBiasCorrection) {
  const Tensor p = Tensor::from_vector<double>({1.0}, {1});
  const Tensor m = Tensor::zeros({1}, DType::f64);
  const Tensor v = Tensor::zeros({1}, DType::f64);
  AdamWHyper h;
  h.lr = 0.01;
  h.weight_decay = 0.1;
  h.step = 1;
  adamw_step({p}, {Tensor::from_vector<double>({0.5}, {1})}, {m}, {v}, h);
  // p = 0.999 - 0.01 * (0.05 / 0.1) / (sqrt(0.00025 / 0.001) + 1e-8).
  EXPECT_NEAR(p.item(), 0.9890000002, 1e-12);
  EXPECT_NEAR(m.item(), 0.05, 1e-15);
  EXPECT_NEAR(v.item(), 0.00025, 1e-15);
  h.step = 2;
  adamw_step({p}, {Tensor::from_vector<double>({-0.25}, {1})}, {m}, {v}, h);
  EXPECT_NEAR(m.item(), 0.02, 1e-15);
  EXPECT_NEAR(v.item(), 0.00031225, 1e-15);
  EXPECT_NEAR(p.item(), 0.9853476298705847, 1e-12);
}

TEST(AdamWStep, ManyTensorsF32AndSkippedGradient) {
  std::vector<Tensor> params, grads, m, v;
  for (int i = 0; i < 5; ++i) {
    params.push_back(Tensor::full({3 + i * 1000}, 1.0));
    grads.push_back(i == 2 ? Tensor() : Tensor::full({3 + i * 1000}, 0.5));
    m.push_back(Tensor::zeros({3 + i * 1000}));
    v.push_back(Tensor::zeros({3 + i * 1000}));
  }
  AdamWHyper h;
  h.lr = 0.01;
  h.weight_decay = 0.1;
  adamw_step(params, grads, m, v, h);
  for (int i = 0; i < 5; ++i) {
    for (float value : params[i].to_vector<float>()) {
      EXPECT_NEAR(value, i == 2 ? 1.0f : 0.989f, 1e-6f) << "tensor " << i;
    }
  }
}

TEST(OptimizerStep, RejectsBadArguments) {
  const Tensor p = Tensor::zeros({3});
  const Tensor g = Tensor::zeros({3});
  SgdHyper sgd;
  EXPECT_THROW(sgd_step({p}, {}, {}, sgd), ValueError);
  EXPECT_THROW(sgd_step({p}, {Tensor::zeros({4})}, {}, sgd), ShapeError);
  EXPECT_THROW(sgd_step({p}, {Tensor::zeros({3}, DType::f64)}, {}, sgd), DTypeError);
  EXPECT_THROW(sgd_step({Tensor::zeros({3}, DType::i32)}, {Tensor::zeros({3}, DType::i32)}, {}, sgd),
               DTypeError);
  EXPECT_THROW(sgd_step({p, Tensor::zeros({2}, DType::f64)}, {g, Tensor::zeros({2}, DType::f64)}, {}, sgd),
               DTypeError);
  sgd.momentum = 0.9;
  EXPECT_THROW(sgd_step({p}, {g}, {}, sgd), ValueError);
  EXPECT_THROW(sgd_step({p}, {g}, {Tensor::zeros({2})}, sgd), ShapeError);
  EXPECT_THROW(sgd_step({Tensor::zeros({2, 3}).permute({1, 0})}, {Tensor::zeros({3, 2})},
                        {Tensor::zeros({3, 2})}, sgd),
               ValueError);
  sgd.momentum = 0.0;
  sgd.nesterov = true;
  EXPECT_THROW(sgd_step({p}, {g}, {}, sgd), ValueError);
  AdamWHyper adam;
  adam.step = 0;
  EXPECT_THROW(adamw_step({p}, {g}, {Tensor::zeros({3})}, {Tensor::zeros({3})}, adam), ValueError);
  adam.step = 1;
  adam.beta1 = 1.0;
  EXPECT_THROW(adamw_step({p}, {g}, {Tensor::zeros({3})}, {Tensor::zeros({3})}, adam), ValueError);
  adam.beta1 = 0.9;
  EXPECT_THROW(adamw_step({p}, {g}, {Tensor::zeros({3})}, {}, adam), ValueError);
  EXPECT_THROW(adamw_step({p}, {g}, {Tensor::zeros({3})}, {Tensor::zeros({3}, DType::f64)}, adam),
               ShapeError);
}

// sums[i] += grads[i] where both are defined; mismatched pairs are refused before anything is added.
TEST(AccumulateGradients, AddsDefinedPairsAndChecksThem) {
  const Tensor a = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  const Tensor b = Tensor::from_vector<float>({10.0f}, {1});
  accumulate_gradients({a, b, Tensor()}, {Tensor::from_vector<float>({0.5f, -1.0f}, {2}), Tensor(), a});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, 1.0f}));
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>{10.0f});
  EXPECT_THROW(accumulate_gradients({a}, {}), ValueError);
  EXPECT_THROW(accumulate_gradients({a}, {b}), ValueError);
  EXPECT_THROW(accumulate_gradients({a, b}, {a.clone(), Tensor::from_vector<double>({1.0}, {1})}),
               ValueError);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, 1.0f}));
}

}  // namespace
}  // namespace liftoff
