// On the GPU, the epoch's last, smaller batch no longer plans its convolutions (cuDNN searches, tens to
// hundreds of milliseconds each) when it comes: the Trainer prepared its shape after the first step, so the
// measured steps, the tails of every epoch included, add no plan.
#include <gtest/gtest.h>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/zoo.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "ops/conv2d/kernels.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA  // conv_plan_count exists in CUDA builds only
struct PlanCounts {
  int64_t after_warmup =
      -1;  // after the second optimizer step (the rehearsal ran after the first; the third is the tail)
  int64_t at_end = -1;
  int64_t prepared_rows = 0;
};

// Two epochs of 60 samples in batches of 24 (tail of 12), graphs on where they can be. `size`: an image size
// no other test uses, so that the shapes are new to the process's plan cache.
PlanCounts plans_during_training(bool prepare, int64_t size) {
  const Device cuda = Device::cuda(0);
  auto model = make_model("resnet20", 1, 10, size, 7);
  model->to(cuda);
  InOrderOptions data;
  data.batch = 24;
  data.device = cuda;
  InOrderBatches batches(make_synthetic_dataset(60, 1, size, size, 10, 5), data);
  SGD sgd(model->parameters(), 0.05, 0.9, 5e-4, true);
  TrainerOptions options;
  options.prepare_tail_shape = prepare;
  options.graph_warmup_steps = 1;
  Trainer trainer(*model, sgd, nullptr, options);
  PlanCounts counts;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    trainer.train_epoch(batches, epoch, [&](const StepProgress& p) {
      if (p.global_step == 2) counts.after_warmup = cuda::conv_plan_count(0);
    });
  }
  counts.at_end = cuda::conv_plan_count(0);
  counts.prepared_rows = trainer.prepared_tail_rows();
  return counts;
}
#endif

TEST(TailBatchCuda, NoConvolutionIsPlannedInsideTheMeasuredSteps) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const PlanCounts prepared = plans_during_training(true, 14);
  EXPECT_EQ(prepared.prepared_rows, 12);
  ASSERT_GE(prepared.after_warmup, 0);
  EXPECT_EQ(prepared.at_end, prepared.after_warmup) << "the tail planned its convolutions when it came";
  // Control: without the preparation the tail does plan inside the measured steps (the count can move).
  const PlanCounts unprepared = plans_during_training(false, 13);
  EXPECT_EQ(unprepared.prepared_rows, 0);
  EXPECT_GT(unprepared.at_end, unprepared.after_warmup);
#endif
}

}  // namespace
}  // namespace liftoff
