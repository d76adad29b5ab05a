// The Trainer counts the model's forward FLOPs per image during its first step (for the report's MFU), with
// no extra forward: a small conv net on the CPU against a hand count.
#include <gtest/gtest.h>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"

namespace liftoff {
namespace {

TEST(TrainerFlops, CountsTheFirstForwardPerImage) {
  Generator gen(5);
  Sequential model{std::make_shared<Conv2d>(1, 4, 3, 1, 1, true, gen), std::make_shared<ReLU>(),
                   std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
                   std::make_shared<Linear>(4 * 4 * 4, 10, true, gen)};
  InOrderOptions o;
  o.batch = 8;
  o.augment = false;
  InOrderBatches batches(make_synthetic_dataset(32, 1, 8, 8, 10, 3), o);
  SGD sgd(model.parameters(), 0.1);
  Trainer trainer(model, sgd, nullptr, TrainerOptions{});
  EXPECT_EQ(trainer.model_flops_per_image(), 0.0);  // nothing ran yet
  EXPECT_EQ(trainer.train_epoch(batches, 0).steps, 4);
  // Per image: conv 2 * (8*8) * 4 * (1*3*3) = 4608; linear 2 * 10 * 64 = 1280 (the loss is not the model's).
  EXPECT_DOUBLE_EQ(trainer.model_flops_per_image(), 4608.0 + 1280.0);
}

}  // namespace
}  // namespace liftoff
