// The run's one throughput figure: images over the device's wall time on the steps (runtime/profile/
// throughput.h), from recorded step times, and the Profiler's use of it on the CPU.
#include "runtime/profile/throughput.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/profile/profiler.h"

namespace liftoff {
namespace {

TEST(Throughput, HostPacedStepsCountTheirOwnWallTimeAndNotTheGaps) {
  ThroughputMeter m;
  m.add_step(10.0, 10.5, 100, true);  // the device finishes as the host ends each step
  m.add_step(10.5, 11.0, 100, true);
  m.add_step(20.0, 20.5, 100, true);  // after an evaluation of 9 s: not training time
  const ThroughputFigures f = m.figures();
  EXPECT_EQ(f.steps, 3);
  EXPECT_EQ(f.images, 300);
  EXPECT_DOUBLE_EQ(f.seconds, 1.5);
  EXPECT_DOUBLE_EQ(f.images_per_second(), 200.0);
}

// Recorded from the issue: under CUDA graphs the host queued 50 steps in a fraction of the time the device
// took; the host clock gave 2.3x the true rate. Here 4 steps queued within 4 ms, each taking the device 1 s.
TEST(Throughput, QueuedStepsAreTimedByTheDeviceNotByTheHost) {
  ThroughputMeter m;
  m.add_step(0.000, 1.0, 256, false);  // warm-up
  m.add_step(0.001, 2.0, 256, true);
  m.add_step(0.002, 3.0, 256, true);
  m.add_step(0.003, 4.0, 256, true);
  const ThroughputFigures f = m.figures();
  EXPECT_EQ(f.steps, 3);             // the warm-up step is left out...
  EXPECT_DOUBLE_EQ(f.seconds, 3.0);  // ...and each measured step starts when the device finished the last
  EXPECT_DOUBLE_EQ(f.images_per_second(), 256.0);
}

TEST(Throughput, ARunNoLongerThanItsWarmupIsReportedOnItsWarmupSteps) {
  ThroughputMeter m;
  EXPECT_EQ(m.figures().images_per_second(), 0.0);  // nothing yet: no figure, never a division by zero
  m.add_step(0.0, 0.25, 8, false);
  m.add_step(0.5, 0.75, 8, false);
  EXPECT_EQ(m.figures().steps, 2);
  EXPECT_DOUBLE_EQ(m.figures().images_per_second(), 32.0);
  m.add_step(1.0, 1.5, 8, true);
  EXPECT_EQ(m.figures().steps, 1);
  EXPECT_DOUBLE_EQ(m.figures().images_per_second(), 16.0);
}

TEST(Throughput, ADeviceEndBeforeTheHostBeginIsAnEmptySpan) {
  ThroughputMeter m;
  m.add_step(5.0, 4.999999, 1, true);  // anchoring error of a microsecond
  EXPECT_EQ(m.figures().seconds, 0.0);
}

// On the CPU the profiler's throughput is the host's: the sum of the measured steps' wall times, and the
// figure it shows while running is the one its summary ends with.
TEST(Throughput, ProfilerOnTheCpuTimesStepsByTheHostClock) {
  ProfilerOptions o;
  o.warmup_steps = 1;
  Profiler p(o);
  for (int i = 0; i < 4; ++i) {
    p.begin_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    p.end_step(32);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // between steps: not training time
  }
  p.finish();
  const ProfileSummary s = p.summary();
  EXPECT_EQ(s.throughput.steps, 3);
  EXPECT_EQ(s.throughput.images, s.totals.images);
  EXPECT_NEAR(s.throughput.seconds, s.totals.wall_ms * 1e-3, 1e-9);
  EXPECT_EQ(p.throughput().images_per_second(), s.throughput.images_per_second());
}

}  // namespace
}  // namespace liftoff
