// Gradient accumulation: K micro-batches of B give the same update as one batch of K*B (a model without batch
// norm; with batch norm the statistics are per micro-batch, the one documented difference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/scale/scale.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

std::unique_ptr<Sequential> make_mlp() {
  Generator gen(5);
  return std::make_unique<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Flatten>(), std::make_shared<Linear>(64, 32, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(32, 10, true, gen)});
}

InOrderOptions in_order(int64_t micro) {
  InOrderOptions options;
  options.batch = micro;
  options.shuffle = false;
  options.augment = false;
  return options;
}

// One optimizer step of SGD with momentum over the first 32 samples, as `micro` x `accum`.
std::vector<Tensor> params_after_one_step(int64_t micro, int64_t accum) {
  auto model = make_mlp();
  InOrderBatches batches(make_synthetic_dataset(32, 1, 8, 8, 10, 3), in_order(micro));
  SGD sgd(model->parameters(), 0.5, 0.9, 1e-3, true);
  TrainerOptions trainer_options;
  trainer_options.accum = accum;
  trainer_options.max_steps = 1;
  trainer_options.label_smoothing = 0.1;
  Trainer trainer(*model, sgd, nullptr, trainer_options);
  const EpochResult r = trainer.train_epoch(batches, 0);
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.images, micro * accum);
  return model->parameters();
}

TEST(Accumulation, FourMicroBatchesEqualOneBatchOfFourTimesTheSize) {
  const std::vector<Tensor> accumulated = params_after_one_step(8, 4);
  const std::vector<Tensor> whole = params_after_one_step(32, 1);
  const std::vector<Tensor> untouched = make_mlp()->parameters();
  ASSERT_EQ(accumulated.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    // f32 sums in another order: rounding only.
    EXPECT_TRUE(testing::all_close(accumulated[i], whole[i], 1e-6, 1e-5)) << "parameter " << i;
    // And the step really moved the parameters (the comparison is not between two untouched models).
    EXPECT_FALSE(testing::all_close(whole[i], untouched[i], 1e-6, 0)) << "parameter " << i;
  }
}

// The trainer sums a step's middle micro-batches with one multi-tensor add instead of autograd's
// per-parameter accumulation: the same additions in the same order, so the parameters match plain autograd
// accumulation bit for bit, for full steps and for a short tail (56 samples in micro-batches of 8, accum 4: a
// step of 4, a tail of 3).
TEST(Accumulation, TrainerSumsEqualAutogradAccumulationBitForBit) {
  const int64_t micro = 8, accum = 4;
  const ImageDataset data = make_synthetic_dataset(56, 1, 8, 8, 10, 3);
  auto trained = make_mlp();
  {
    InOrderBatches batches(data, in_order(micro));
    SGD sgd(trained->parameters(), 0.5, 0.9, 1e-3, true);
    TrainerOptions options;
    options.accum = accum;
    options.label_smoothing = 0.1;
    Trainer trainer(*trained, sgd, nullptr, options);
    const EpochResult r = trainer.train_epoch(batches, 0);
    EXPECT_EQ(r.steps, 2);
  }
  auto reference = make_mlp();
  {
    InOrderBatches batches(data, in_order(micro));
    SGD sgd(reference->parameters(), 0.5, 0.9, 1e-3, true);
    batches.start_epoch(0);
    Batch batch;
    int64_t pending = 0;
    while (batches.next(batch)) {
      const Tensor loss = cross_entropy(reference->forward(batch.input), batch.labels, 0.1);
      scale(loss, 1.0 / static_cast<double>(accum)).backward();
      if (++pending == accum) {
        sgd.step();
        sgd.zero_grad();
        pending = 0;
      }
    }
    sgd.step();  // the tail
  }
  const std::vector<Tensor> a = trained->parameters(), b = reference->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "parameter " << i;
  }
}

// --concurrent-micro-batches on asks for something only a captured CUDA step with several micro-batches does:
// anything else is a clear error at construction, not a silently sequential run.
TEST(Accumulation, ConcurrentMicroBatchesOnNeedsACapturedStepWithSeveralMicroBatches) {
  auto model = make_mlp();
  SGD sgd(model->parameters(), 0.5, 0.9, 1e-3, true);
  TrainerOptions options;
  options.accum = 4;
  options.cuda_graphs = GraphMode::automatic;
  options.concurrent_micro_batches = BranchMode::on;
  try {
    Trainer trainer(*model, sgd, nullptr, options);  // a CPU model
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
  }
  options.concurrent_micro_batches = BranchMode::automatic;  // auto: falls back quietly (the report says why)
  EXPECT_NO_THROW(Trainer(*model, sgd, nullptr, options));
  EXPECT_EQ(parse_branch_mode("auto"), BranchMode::automatic);
  EXPECT_EQ(parse_branch_mode("on"), BranchMode::on);
  EXPECT_STREQ(branch_mode_name(BranchMode::off), "off");
  EXPECT_THROW(parse_branch_mode("yes"), ValueError);
}

// With gradient-ready hooks on the parameters (what DDP registers), the step's last micro-batch accumulates
// through autograd, so its hooks see the step's complete gradient in .grad (the sum of all micro-batches).
TEST(Accumulation, HooksOfTheLastMicroBatchSeeTheCompleteGradient) {
  const int64_t micro = 8, accum = 4;
  const ImageDataset data = make_synthetic_dataset(32, 1, 8, 8, 10, 3);
  auto hooked = make_mlp();
  const std::vector<Tensor> params = hooked->parameters();
  std::vector<Tensor> seen(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].add_grad_ready_hook([&seen, i](const Tensor& leaf) { seen[i] = leaf.grad().clone(); });
  }
  {
    InOrderBatches batches(data, in_order(micro));
    SGD sgd(params, 0.5, 0.9, 1e-3, true);
    TrainerOptions options;
    options.accum = accum;
    options.max_steps = 1;
    Trainer trainer(*hooked, sgd, nullptr, options);
    trainer.train_epoch(batches, 0);
  }
  auto reference = make_mlp();
  InOrderBatches batches(data, in_order(micro));
  batches.start_epoch(0);
  Batch batch;
  while (batches.next(batch)) {
    const Tensor loss = cross_entropy(reference->forward(batch.input), batch.labels);
    scale(loss, 1.0 / static_cast<double>(accum)).backward();
  }
  const std::vector<Tensor> expected = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(seen[i].defined()) << "parameter " << i;
    EXPECT_EQ(seen[i].to_vector<float>(), expected[i].grad().to_vector<float>()) << "parameter " << i;
  }
}

TEST(Accumulation, MismatchedAccumulationDiffers) {
  // Sanity of the test itself: one micro-batch of 8 (a different update) is not close to the batch of 32.
  const std::vector<Tensor> partial = params_after_one_step(8, 1);
  const std::vector<Tensor> whole = params_after_one_step(32, 1);
  double largest = 0.0;
  for (size_t i = 0; i < whole.size(); ++i) {
    const std::vector<double> a = partial[i].to_vector<double>(), b = whole[i].to_vector<double>();
    for (size_t j = 0; j < a.size(); ++j) largest = std::max(largest, std::abs(a[j] - b[j]));
  }
  EXPECT_GT(largest, 1e-3);
}

}  // namespace
}  // namespace liftoff
