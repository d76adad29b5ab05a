// An epoch's last, smaller batch: the Trainer prepares its shape once, after the first step (so cuDNN's
// searches for it fall in the warm-up), and that rehearsal leaves no trace in what training computes.
#include <gtest/gtest.h>

#include <memory>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "runtime/capture.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// A model with buffers (batch-norm statistics and its batch counter) and a dropout generator: what a
// rehearsal could disturb.
std::unique_ptr<Sequential> make_bn_model() {
  Generator gen(11);
  return std::make_unique<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 4, 3, 1, 1, false, gen), std::make_shared<BatchNorm2d>(4),
      std::make_shared<ReLU>(), std::make_shared<Dropout>(0.25, 13), std::make_shared<Flatten>(),
      std::make_shared<Linear>(4 * 8 * 8, 10, true, gen)});
}

InOrderOptions batches_of(int64_t batch, bool drop_last) {
  InOrderOptions o;
  o.batch = batch;
  o.drop_last = drop_last;
  o.augment = false;
  return o;
}

struct TailRun {
  std::unique_ptr<Sequential> model = make_bn_model();
  int64_t prepared = -1;
  std::vector<int64_t> epoch_steps;
};

// Two epochs of 30 samples in batches of 8 (tail of 6 unless dropped).
TailRun train_two_epochs(bool prepare, bool drop_last) {
  TailRun run;
  InOrderBatches batches(make_synthetic_dataset(30, 1, 8, 8, 10, 4), batches_of(8, drop_last));
  SGD sgd(run.model->parameters(), 0.1, 0.9, 5e-4, true);
  TrainerOptions options;
  options.prepare_tail_shape = prepare;
  Trainer trainer(*run.model, sgd, nullptr, options);
  for (int64_t epoch = 0; epoch < 2; ++epoch)
    run.epoch_steps.push_back(trainer.train_epoch(batches, epoch).steps);
  run.prepared = trainer.prepared_tail_rows();
  return run;
}

void expect_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(testing::all_close(a[i], b[i], 0.0, 0.0)) << what << " " << i;
}

TEST(TailBatch, ItsShapeIsPreparedOnceAndLeavesNoTrace) {
  const TailRun prepared = train_two_epochs(/*prepare=*/true, /*drop_last=*/false);
  const TailRun plain = train_two_epochs(/*prepare=*/false, /*drop_last=*/false);
  EXPECT_EQ(prepared.prepared, 6);
  EXPECT_EQ(plain.prepared, 0);
  EXPECT_EQ(prepared.epoch_steps, (std::vector<int64_t>{4, 4}));  // the tail is trained on
  // Same parameters and batch-norm buffers, bit for bit: the rehearsal's gradients, statistics and dropout
  // draws are gone.
  expect_identical(prepared.model->parameters(), plain.model->parameters(), "parameter");
  expect_identical(prepared.model->buffers(), plain.model->buffers(), "buffer");
  // And the runs trained (the comparison is not between two untouched models).
  EXPECT_FALSE(
      testing::all_close(prepared.model->parameters()[0], make_bn_model()->parameters()[0], 0.0, 0.0));
}

TEST(TailBatch, DropLastLeavesNoTailToPrepare) {
  const TailRun dropped = train_two_epochs(/*prepare=*/true, /*drop_last=*/true);
  EXPECT_EQ(dropped.prepared, 0);
  EXPECT_EQ(dropped.epoch_steps, (std::vector<int64_t>{3, 3}));  // 30 / 8: the 6 left over are not trained on
}

// Records, per forward, the batch's rows and whether self-tuning ops were told to guess (QuickTuningScope).
class TuningProbe : public Module {
 public:
  explicit TuningProbe(Module& inner) : inner_(inner) {}
  Tensor forward(const Tensor& x) override {
    calls.push_back({x.size(0), quick_tuning_active()});
    return inner_.forward(x);
  }
  std::vector<std::pair<int64_t, bool>> calls;

 private:
  Module& inner_;
};

// An evaluation's last, smaller batch runs once per evaluation: its convolutions take cuDNN's first guess
// instead of a timed search (ResNet-9: 65 ms of a first run's 0.7 s of searches); every full batch tunes.
TEST(TailBatch, EvaluationTailGuessesRatherThanTunes) {
  auto model = make_bn_model();
  TuningProbe probe(*model);
  SGD sgd(model->parameters(), 0.1);
  Trainer trainer(probe, sgd, nullptr, TrainerOptions{});
  InOrderBatches test(make_synthetic_dataset(30, 1, 8, 8, 10, 5), batches_of(8, /*drop_last=*/false));
  const EvalResult result = trainer.evaluate(test);
  EXPECT_EQ(result.images, 30);
  const std::vector<std::pair<int64_t, bool>> expected = {{8, false}, {8, false}, {8, false}, {6, true}};
  EXPECT_EQ(probe.calls, expected);
  EXPECT_FALSE(quick_tuning_active());  // the scope ended with the batch
}

}  // namespace
}  // namespace liftoff
