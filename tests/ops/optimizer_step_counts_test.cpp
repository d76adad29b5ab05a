// adamw_step with per-parameter update counts (AdamWHyper::step_counts, torch's capturable AdamW) on the CPU:
// the same numbers as the host `step` path, counts that skip with the step, and the checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/optimizer_step/optimizer_step.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct AdamWLists {
  std::vector<Tensor> params, grads, m, v, counts;
};

AdamWLists make_lists(DType dtype, int tensors) {
  AdamWLists l;
  for (int i = 0; i < tensors; ++i) {
    l.params.push_back(testing::random_tensor({5 + i}, 10 + i, -1, 1, dtype));
    l.grads.push_back(testing::random_tensor({5 + i}, 20 + i, -1, 1, dtype));
    l.m.push_back(Tensor::zeros({5 + i}, dtype));
    l.v.push_back(Tensor::zeros({5 + i}, dtype));
    l.counts.push_back(Tensor::zeros({}, DType::i64));
  }
  return l;
}

AdamWHyper hyper_with_decay() {
  AdamWHyper h;
  h.lr = 0.01;
  h.weight_decay = 0.05;
  return h;
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  return testing::all_close(a, b, 0.0, 0.0);
}

TEST(AdamWStepCounts, MatchTheHostStepBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    AdamWLists counted = make_lists(dtype, 3);
    AdamWLists host = make_lists(dtype, 3);
    for (int64_t step = 1; step <= 4; ++step) {
      AdamWHyper h = hyper_with_decay();
      h.step = step;
      adamw_step(host.params, host.grads, host.m, host.v, h);
      h.step = 999;  // ignored with counts
      h.step_counts = counted.counts;
      adamw_step(counted.params, counted.grads, counted.m, counted.v, h);
    }
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(bit_identical(counted.params[i], host.params[i])) << dtype_name(dtype) << " " << i;
      EXPECT_TRUE(bit_identical(counted.v[i], host.v[i]));
      EXPECT_EQ(counted.counts[i].to_vector<int64_t>(), std::vector<int64_t>{4});
    }
  }
}

TEST(AdamWStepCounts, ParametersAtDifferentCountsUseTheirOwnBiasCorrection) {
  AdamWLists l = make_lists(DType::f64, 2);
  l.counts[1].fill_(5.0);  // the second parameter has been updated 5 times already
  const std::vector<Tensor> start = {l.params[0].clone(), l.params[1].clone()};
  AdamWHyper h = hyper_with_decay();
  h.step_counts = l.counts;
  adamw_step(l.params, l.grads, l.m, l.v, h);
  EXPECT_EQ(l.counts[0].to_vector<int64_t>(), std::vector<int64_t>{1});
  EXPECT_EQ(l.counts[1].to_vector<int64_t>(), std::vector<int64_t>{6});
  for (size_t i = 0; i < 2; ++i) {
    const Tensor p = start[i].clone();
    const Tensor m = Tensor::zeros(p.shape(), DType::f64), v = Tensor::zeros(p.shape(), DType::f64);
    AdamWHyper one = hyper_with_decay();
    one.step = i == 0 ? 1 : 6;
    adamw_step({p}, {l.grads[i]}, {m}, {v}, one);
    EXPECT_TRUE(bit_identical(p, l.params[i])) << "parameter " << i;
  }
}

TEST(AdamWStepCounts, ASkippedStepAdvancesNoCount) {
  AdamWLists l = make_lists(DType::f32, 2);
  AdamWHyper h = hyper_with_decay();
  h.step_counts = l.counts;
  adamw_step(l.params, l.grads, l.m, l.v, h);
  const Tensor before = l.params[0].clone();
  for (float flag : {1.0f, std::nanf("")}) {
    adamw_step(l.params, l.grads, l.m, l.v, h, Tensor::full({1}, flag, DType::f32));
    EXPECT_EQ(l.counts[0].to_vector<int64_t>(), std::vector<int64_t>{1});
    EXPECT_TRUE(bit_identical(l.params[0], before));
  }
  adamw_step(l.params, l.grads, l.m, l.v, h, Tensor::zeros({1}, DType::f32));
  EXPECT_EQ(l.counts[1].to_vector<int64_t>(), std::vector<int64_t>{2});
}

TEST(AdamWStepCounts, EntriesWithoutGradientKeepTheirCount) {
  AdamWLists l = make_lists(DType::f32, 2);
  l.grads[0] = Tensor();
  AdamWHyper h = hyper_with_decay();
  h.step_counts = l.counts;
  adamw_step(l.params, l.grads, l.m, l.v, h);
  EXPECT_EQ(l.counts[0].to_vector<int64_t>(), std::vector<int64_t>{0});
  EXPECT_EQ(l.counts[1].to_vector<int64_t>(), std::vector<int64_t>{1});
}

TEST(AdamWStepCounts, LearningRateTensorReplacesTheHyperparameter) {
  AdamWLists a = make_lists(DType::f64, 1);
  AdamWLists b = make_lists(DType::f64, 1);
  AdamWHyper h = hyper_with_decay();
  h.lr = 0.003;
  adamw_step(a.params, a.grads, a.m, a.v, h);
  h.lr = 99.0;  // ignored
  h.lr_tensor = Tensor::full({1}, 0.003, DType::f64);
  adamw_step(b.params, b.grads, b.m, b.v, h);
  EXPECT_TRUE(bit_identical(a.params[0], b.params[0]));
}

TEST(AdamWStepCounts, BadCountsAndLearningRateTensorsAreRejected) {
  AdamWLists l = make_lists(DType::f32, 2);
  AdamWHyper h = hyper_with_decay();
  h.step_counts = {l.counts[0]};
  EXPECT_THROW(adamw_step(l.params, l.grads, l.m, l.v, h), ValueError);
  h.step_counts = {l.counts[0], Tensor::zeros({}, DType::f32)};
  EXPECT_THROW(adamw_step(l.params, l.grads, l.m, l.v, h), DTypeError);
  h.step_counts = {l.counts[0], Tensor::zeros({2}, DType::i64)};
  EXPECT_THROW(adamw_step(l.params, l.grads, l.m, l.v, h), DTypeError);
  h.step_counts = l.counts;
  h.lr_tensor = Tensor::full({1}, 0.01, DType::f32);  // f64 only: the exact rate
  EXPECT_THROW(adamw_step(l.params, l.grads, l.m, l.v, h), DTypeError);
  // Nothing was updated by the rejected calls.
  EXPECT_EQ(l.counts[0].to_vector<int64_t>(), std::vector<int64_t>{0});
  EXPECT_EQ(l.counts[1].to_vector<int64_t>(), std::vector<int64_t>{0});
}

}  // namespace
}  // namespace liftoff
