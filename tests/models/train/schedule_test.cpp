#include "models/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/error.h"

namespace liftoff {
namespace {

// Expected values: torch.optim.lr_scheduler (1.13) stepped once per optimizer step, lr read before each step.
constexpr double kTol = 1e-12;

TEST(Schedule, Constant) {
  const auto s = make_schedule("constant", 0.05, 100);
  EXPECT_EQ(s->lr_at(0), 0.05);
  EXPECT_EQ(s->lr_at(1000000), 0.05);
  EXPECT_THROW(s->lr_at(-1), ValueError);
}

TEST(Schedule, StepMatchesStepLR) {
  ScheduleOptions options;
  options.step_size = 30;
  options.gamma = 0.1;
  const auto s = make_schedule("step", 0.1, 100, 0, options);
  EXPECT_NEAR(s->lr_at(0), 0.1, kTol);
  EXPECT_NEAR(s->lr_at(29), 0.1, kTol);
  EXPECT_NEAR(s->lr_at(30), 0.01, kTol);
  EXPECT_NEAR(s->lr_at(60), 0.001, kTol);
  EXPECT_NEAR(s->lr_at(95), 0.0001, kTol);
  options.step_size = 0;
  EXPECT_THROW(make_schedule("step", 0.1, 100, 0, options), ValueError);
}

TEST(Schedule, CosineMatchesCosineAnnealingLR) {
  ScheduleOptions options;
  options.min_lr = 0.001;
  const auto s = make_schedule("cosine", 0.1, 100, 0, options);
  EXPECT_NEAR(s->lr_at(0), 0.1, kTol);
  EXPECT_NEAR(s->lr_at(25), 0.08550178566873408, kTol);
  EXPECT_NEAR(s->lr_at(50), 0.0505, kTol);
  EXPECT_NEAR(s->lr_at(99), 0.0010244252618962857, kTol);
  EXPECT_NEAR(s->lr_at(100), 0.001, kTol);
  EXPECT_NEAR(s->lr_at(5000), 0.001, kTol);
  EXPECT_THROW(make_schedule("cosine", 0.1, 0), ValueError);
}

TEST(Schedule, OneCycleMatchesOneCycleLR) {
  const auto s = make_schedule("onecycle", 0.1, 100);
  EXPECT_NEAR(s->lr_at(0), 0.004, kTol);  // max_lr / div_factor
  EXPECT_NEAR(s->lr_at(10), 0.029516394846410082, kTol);
  EXPECT_NEAR(s->lr_at(29), 0.1, kTol);  // peak at pct_start * total - 1
  EXPECT_NEAR(s->lr_at(30), 0.09994965352845243, kTol);
  EXPECT_NEAR(s->lr_at(60), 0.05892800902855288, kTol);
  EXPECT_NEAR(s->lr_at(99), 4e-07, kTol);  // max_lr / 25 / 1e4
  EXPECT_NEAR(s->lr_at(150), 4e-07, kTol);
  EXPECT_EQ(s->note(), "");  // PyTorch's form: nothing to say
}

// PyTorch refuses runs too short for both phases (`train --max-steps 2`); here they rise and decay at whole
// steps, and the schedule says so once through note().
TEST(Schedule, OneCycleAcceptsAnyStepCount) {
  const auto two = make_schedule("onecycle", 0.1, 2);
  EXPECT_NEAR(two->lr_at(0), 0.1, kTol);    // no room to rise: the peak first
  EXPECT_NEAR(two->lr_at(1), 4e-07, kTol);  // then the final rate
  EXPECT_NE(two->note().find("2 steps are too few"), std::string::npos) << two->note();
  const auto one = make_schedule("onecycle", 0.1, 1);
  EXPECT_NEAR(one->lr_at(0), 0.1, kTol);
  EXPECT_NEAR(one->lr_at(5), 0.1, kTol);
  // Three steps: the decay over steps 0..2, halfway at step 1.
  const auto three = make_schedule("onecycle", 0.1, 3);
  EXPECT_NEAR(three->lr_at(1), (0.1 + 4e-07) / 2, kTol);
  EXPECT_NEAR(three->lr_at(2), 4e-07, kTol);
  // A warm-up wrapper passes the note on; lengths that PyTorch accepts keep its values exactly.
  EXPECT_EQ(make_schedule("onecycle", 0.1, 2, 1)->note(), two->note());
  EXPECT_EQ(make_schedule("onecycle", 0.1, 4)->note(), "");
  EXPECT_THROW(make_schedule("onecycle", 0.1, 0), ValueError);
}

TEST(Schedule, WarmupScalesTheWrappedSchedule) {
  const auto s = make_schedule("cosine", 0.1, 100, 5);
  const CosineLR cosine(0.1, 100);
  EXPECT_NEAR(s->lr_at(0), cosine.lr_at(0) / 5, kTol);
  EXPECT_NEAR(s->lr_at(2), cosine.lr_at(2) * 3 / 5, kTol);
  EXPECT_NEAR(s->lr_at(4), cosine.lr_at(4), kTol);
  EXPECT_NEAR(s->lr_at(5), cosine.lr_at(5), kTol);
  EXPECT_NEAR(s->lr_at(50), 0.05, kTol);
  const auto c = make_schedule("constant", 0.2, 0, 4);
  EXPECT_NEAR(c->lr_at(0), 0.05, kTol);
  EXPECT_NEAR(c->lr_at(3), 0.2, kTol);
  EXPECT_THROW(make_schedule("constant", 0.2, 0, -1), ValueError);
}

TEST(Schedule, UnknownNameListsKnownSchedules) {
  try {
    make_schedule("linear", 0.1, 100);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"linear\""), std::string::npos) << msg;
    for (const auto& name : schedule_names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace liftoff
