// Gradient accumulation: K micro-batches of B give the same update as one batch of K*B (a model without batch
// norm; with batch norm the statistics are per micro-batch, the one documented difference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/layers.h"
#include "models/optim.h"
#include "models/trainer.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

std::unique_ptr<Sequential> make_mlp() {
  Generator gen(5);
  return std::make_unique<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Flatten>(), std::make_shared<Linear>(64, 32, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(32, 10, true, gen)});
}

// One optimizer step of SGD with momentum over the first 32 samples, as `micro` x `accum`.
std::vector<Tensor> params_after_one_step(int64_t micro, int64_t accum) {
  auto model = make_mlp();
  InOrderOptions options;
  options.batch = micro;
  options.shuffle = false;
  options.augment = false;
  InOrderBatches batches(make_synthetic_dataset(32, 1, 8, 8, 10, 3), options);
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
