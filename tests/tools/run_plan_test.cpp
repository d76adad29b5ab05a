// The progress line's totals (--epochs and --max-steps) and its durations.
#include "tools/common/run_plan.h"

#include <gtest/gtest.h>

#include "tools/common/progress.h"

namespace liftoff::tools {
namespace {

RunShape shape(int64_t micro_per_epoch, int64_t accum, int64_t epochs, int64_t max_steps) {
  RunShape s;
  s.micro_batches_per_epoch = micro_per_epoch;
  s.accum = accum;
  s.epochs = epochs;
  s.max_steps = max_steps;
  return s;
}

TEST(RunPlan, EpochsAloneRunEveryBatch) {
  const RunPlan plan(shape(16, 1, 3, -1));
  EXPECT_EQ(plan.total_steps(), 48);
  EXPECT_EQ(plan.epochs(), 3);
  for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(plan.epoch_micro_batches(e), 16);
}

TEST(RunPlan, MaxStepsCutsTheTotalsWhereItStops) {
  const RunPlan plan(shape(16, 1, 3, 40));
  EXPECT_EQ(plan.total_steps(), 40);
  EXPECT_EQ(plan.epochs(), 3);
  EXPECT_EQ(plan.epoch_micro_batches(1), 16);
  EXPECT_EQ(plan.epoch_micro_batches(2), 8);  // the bar's total: where the run ends, not the epoch's size

  const RunPlan inside_first(shape(16, 1, 3, 10));
  EXPECT_EQ(inside_first.epochs(), 1);
  EXPECT_EQ(inside_first.epoch_micro_batches(0), 10);

  const RunPlan at_an_epoch_end(shape(16, 1, 5, 32));
  EXPECT_EQ(at_an_epoch_end.epochs(), 2);
  EXPECT_EQ(at_an_epoch_end.epoch_micro_batches(1), 16);

  EXPECT_EQ(RunPlan(shape(16, 1, 2, 1000)).total_steps(), 32);  // the epochs end first
}

TEST(RunPlan, AccumulationCountsStepsAndATailStep) {
  const RunPlan plan(shape(10, 4, 2, -1));  // 4 + 4 + 2 micro-batches: 3 steps an epoch
  EXPECT_EQ(plan.total_steps(), 6);
  const RunPlan cut(shape(10, 4, 2, 4));
  EXPECT_EQ(cut.epochs(), 2);
  EXPECT_EQ(cut.epoch_micro_batches(1), 4);  // one step of 4 micro-batches into the second epoch
}

TEST(RunPlan, AResumedRunCountsFromWhereItStarts) {
  RunShape s = shape(16, 1, 3, -1);
  s.first_epoch = 1;
  s.skip_micro_batches = 10;
  s.start_step = 26;
  const RunPlan plan(s);
  EXPECT_EQ(plan.total_steps(), 48);
  EXPECT_EQ(plan.epochs(), 3);
  EXPECT_EQ(plan.epoch_micro_batches(1), 16);
  s.max_steps = 30;  // 4 more steps: the resumed epoch ends at micro-batch 14
  const RunPlan cut(s);
  EXPECT_EQ(cut.total_steps(), 30);
  EXPECT_EQ(cut.epochs(), 2);
  EXPECT_EQ(cut.epoch_micro_batches(1), 14);
  s.max_steps = 20;  // already past it: nothing left
  EXPECT_EQ(RunPlan(s).total_steps(), 26);
}

TEST(Progress, DurationsReadAsClockTimes) {
  EXPECT_EQ(format_duration(0.0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(723.0), "12:03");
  EXPECT_EQ(format_duration(3723.0), "1:02:03");
  EXPECT_EQ(format_duration(-5.0), "0:00");
}

}  // namespace
}  // namespace liftoff::tools
