// ModelEma on CUDA inside the Trainer's captured step: the average is updated by every replay (the same
// values as eager steps, bit for bit under deterministic algorithms), evaluations with the average between
// epochs leave the captured step valid, and flip- and shift-averaged evaluation runs on the device (as on the
// CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/zoo.h"
#include "models/train/ema.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "models/train/trainer.h"
#include "runtime/determinism.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct Outcome {
  std::vector<Tensor> averages;
  std::vector<Tensor> params;
  GraphStatus status;
  double eval_loss = 0.0;
  double flip_loss = 0.0;
};

Outcome train(GraphMode graphs, AmpMode amp) {
  set_deterministic_algorithms(true);
  const Device cuda = Device::cuda(0);
  auto model = make_model("resnet20", 1, 10, 12, 7);
  model->to(cuda);
  InOrderOptions data;
  data.batch = 32;
  data.shuffle = true;
  data.augment = true;
  data.seed = 3;
  data.device = cuda;
  InOrderBatches batches(make_synthetic_dataset(200, 1, 12, 12, 10, 11), data);
  SGD sgd(model->parameters(), 0.05, 0.9, 5e-4, true);
  const auto schedule = make_schedule("onecycle", 0.05, 2 * batches.batches_per_epoch());
  ModelEma ema(*model, {0.9, true});
  TrainerOptions options;
  options.amp = amp;
  options.cuda_graphs = graphs;
  options.graph_warmup_steps = 2;
  options.ema = &ema;
  Trainer trainer(*model, sgd, schedule.get(), options);
  InOrderOptions eval_data = data;
  eval_data.batch = 50;
  eval_data.shuffle = false;
  eval_data.augment = false;
  InOrderBatches eval_batches(make_synthetic_dataset(100, 1, 12, 12, 10, 5), eval_data);
  Outcome out;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    trainer.train_epoch(batches, epoch);
    out.eval_loss = trainer.evaluate(eval_batches).mean_loss;  // swaps the average in and out, in place
  }
  EvalOptions flip;
  flip.hflip = true;
  out.flip_loss = trainer.evaluate(eval_batches, flip).mean_loss;
  set_deterministic_algorithms(false);
  for (const auto& [name, t] : ema.named_averages()) out.averages.push_back(t.to(Device::cpu()));
  for (const Tensor& p : model->parameters()) out.params.push_back(p.to(Device::cpu()));
  out.status = trainer.graph_status();
  return out;
}

TEST(EmaCuda, CapturedStepUpdatesTheAverageAsEagerStepsDo) {
  LIFTOFF_REQUIRE_CUDA();
  for (const AmpMode amp : {AmpMode::off, AmpMode::bf16}) {
    const Outcome graphed = train(GraphMode::on, amp);
    const Outcome eager = train(GraphMode::off, amp);
    ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
    EXPECT_GT(graphed.status.graph_steps, 4);
    ASSERT_EQ(graphed.averages.size(), eager.averages.size());
    for (size_t i = 0; i < eager.averages.size(); ++i) {
      EXPECT_TRUE(testing::all_close(graphed.averages[i], eager.averages[i], 0, 0)) << "average " << i;
    }
    for (size_t i = 0; i < eager.params.size(); ++i) {
      EXPECT_TRUE(testing::all_close(graphed.params[i], eager.params[i], 0, 0)) << "parameter " << i;
      // The average lags the weights: it really is another set of values.
      EXPECT_FALSE(testing::all_close(graphed.averages[i], graphed.params[i], 1e-7, 0)) << "parameter " << i;
    }
    EXPECT_EQ(graphed.eval_loss, eager.eval_loss);
    EXPECT_EQ(graphed.flip_loss, eager.flip_loss);
    EXPECT_NE(graphed.flip_loss, graphed.eval_loss);
  }
}

// Flip and shift averaging on the device give the CPU's figures (same weights, f32).
TEST(EvaluateCuda, ShiftAndFlipAveragingMatchTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  EvalOptions views;
  views.hflip = true;
  views.shift = true;
  EvalResult on[2];
  for (int i = 0; i < 2; ++i) {
    const Device device = i == 0 ? Device::cpu() : Device::cuda(0);
    auto model = make_model("resnet20", 1, 10, 12, 7);  // the same seed: the same weights
    model->to(device);
    SGD sgd(model->parameters(), 0.05);
    Trainer trainer(*model, sgd, nullptr, TrainerOptions{});
    InOrderOptions data;
    data.batch = 50;
    data.shuffle = false;
    data.augment = false;
    data.device = device;
    InOrderBatches batches(make_synthetic_dataset(100, 1, 12, 12, 10, 5), data);
    on[i] = trainer.evaluate(batches, views);
  }
  EXPECT_EQ(on[1].images, 100);
  EXPECT_NEAR(on[1].mean_loss, on[0].mean_loss, 1e-4 * std::abs(on[0].mean_loss) + 1e-5);
  EXPECT_NEAR(on[1].accuracy, on[0].accuracy, 0.011);  // a near tie may flip one image of 100
}

}  // namespace
}  // namespace liftoff
