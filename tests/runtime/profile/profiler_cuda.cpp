// Profiler device marks on a real GPU: events resolve late without blocking, device times are plausible,
// the ring drops (never waits for) steps the device is too far behind on, and device spans land on the host
// clock.
#include <gtest/gtest.h>

#include <chrono>

#include "ops/linear/linear.h"
#include "runtime/profile/profiler.h"
#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

using Clock = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Queues about `n` large matrix products on the compute stream (asynchronous).
Tensor queue_work(const Tensor& a, int n) {
  Tensor x = a;
  for (int i = 0; i < n; ++i) x = matmul(a, a);
  return x;
}

Tensor square(int64_t n) {
  return Tensor::full({n, n}, 1e-3, DType::f32, Device::cuda(0));
}

TEST(ProfilerCuda, DeviceStagesResolveLateAndAddUp) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions o;
  o.lag = 2;
  o.warmup_steps = 1;
  o.keep_trace = true;
  Profiler p(o);
  const Tensor a = square(1024);
  queue_work(a, 1);
  p.set_device(Device::cuda(0));
  const double start = now_s();
  const int steps = 8;
  for (int i = 0; i < steps; ++i) {
    p.begin_step();
    {
      Profiler::StageScope h(&p, Stage::forward);
      Profiler::DeviceScope d(&p, Stage::forward);
      queue_work(a, 4);
    }
    {
      Profiler::StageScope h(&p, Stage::backward);
      Profiler::DeviceScope d(&p, Stage::backward);
      queue_work(a, 8);
    }
    {
      Profiler::DeviceScope d(&p, Stage::h2d, StreamKind::copy);  // an empty copy-stream stage
    }
    p.end_step(64);
  }
  p.finish();
  const double end = now_s();
  const ProfileSummary s = p.summary();
  EXPECT_TRUE(s.device_timing);
  EXPECT_EQ(s.totals.steps, steps - 1);
  EXPECT_EQ(s.totals.device_steps, steps - 1);
  EXPECT_EQ(s.device_steps_dropped, 0);
  const double fwd = s.totals.device_ms[static_cast<size_t>(Stage::forward)];
  const double bwd = s.totals.device_ms[static_cast<size_t>(Stage::backward)];
  EXPECT_GT(fwd, 0.0);
  EXPECT_GT(bwd, fwd);  // twice the work
  EXPECT_EQ(s.totals.device_marks[static_cast<size_t>(Stage::h2d)], steps - 1);
  EXPECT_GE(s.totals.device_ms[static_cast<size_t>(Stage::h2d)], 0.0);
  // The union of device intervals cannot exceed the sum of the stage times, and both are bounded by the run.
  EXPECT_GT(s.totals.device_busy_ms, 0.0);
  EXPECT_LE(s.totals.device_busy_ms, fwd + bwd + s.totals.device_ms[static_cast<size_t>(Stage::h2d)] + 1e-3);
  EXPECT_LE(s.totals.device_busy_ms, (end - start) * 1e3);
  EXPECT_GE(s.totals.device_lag_ms, 0.0);
  // Device spans sit on the host clock inside the run (anchoring error: well under a millisecond).
  int device_spans = 0;
  for (const TraceSpan& t : p.trace_spans()) {
    if (!t.device) continue;
    ++device_spans;
    EXPECT_GE(t.begin_s, start - 1e-3);
    EXPECT_LE(t.end_s, end + 1e-3);
    EXPECT_LE(t.begin_s, t.end_s);
  }
  EXPECT_EQ(device_spans, 3 * steps);
}

TEST(ProfilerCuda, EndStepNeverWaitsForTheDevice) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions o;
  o.lag = 0;  // query right away: the work cannot be done yet
  o.warmup_steps = 0;
  Profiler p(o);
  const Tensor a = square(4096);
  queue_work(a, 1);
  p.set_device(Device::cuda(0));
  p.begin_step();
  const auto t0 = Clock::now();
  {
    Profiler::DeviceScope d(&p, Stage::forward);
    queue_work(a, 40);  // tens of milliseconds of device work
  }
  p.end_step(1);
  const double host_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(p.summary().totals.device_steps, 0) << "resolved a step whose work had not finished";
  p.finish();
  const ProfileSummary s = p.summary();
  ASSERT_EQ(s.totals.device_steps, 1);
  const double device_ms = s.totals.device_ms[static_cast<size_t>(Stage::forward)];
  EXPECT_GT(device_ms, host_ms) << "the host waited for the device";
}

TEST(ProfilerCuda, FullRingDropsInsteadOfWaiting) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions o;
  o.lag = 0;
  o.ring_slack = 1;  // ring of 2 steps
  o.warmup_steps = 0;
  Profiler p(o);
  const Tensor a = square(4096);
  queue_work(a, 1);
  p.set_device(Device::cuda(0));
  for (int i = 0; i < 6; ++i) {
    p.begin_step();
    {
      Profiler::DeviceScope d(&p, Stage::forward);
      queue_work(a, 10);
    }
    p.end_step(1);
  }
  p.finish();
  const ProfileSummary s = p.summary();
  EXPECT_GE(s.device_steps_dropped, 1);
  EXPECT_EQ(s.totals.device_steps + s.device_steps_dropped, 6);
}

TEST(ProfilerCuda, AllreduceOverlapOnTheCommStream) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions o;
  o.lag = 1;
  o.warmup_steps = 0;
  Profiler p(o);
  const Tensor a = square(2048);
  queue_work(a, 1);
  p.set_device(Device::cuda(0));
  p.begin_step();
  {
    Profiler::DeviceScope d(&p, Stage::backward);
    queue_work(a, 10);
  }
  {
    // Nothing runs on the comm stream: its (empty) all-reduce interval is not covered by compute marks.
    Profiler::DeviceScope d(&p, Stage::allreduce, StreamKind::comm);
  }
  p.end_step(1);
  p.finish();
  const ProfileTotals t = p.summary().totals;
  ASSERT_EQ(t.device_steps, 1);
  EXPECT_EQ(t.device_marks[static_cast<size_t>(Stage::allreduce)], 1);
  EXPECT_LE(t.allreduce_overlapped_ms, t.device_ms[static_cast<size_t>(Stage::allreduce)] + 1e-6);
}

}  // namespace
}  // namespace liftoff

namespace liftoff {
namespace {

// Steps queued faster than the device runs them (as a CUDA graph's are): the host's step times add up to a
// fraction of the run, the throughput's spans to the device's time, and every step is timed even when the
// ring drops the stage marks of steps the device is too far behind on.
TEST(ProfilerCuda, ThroughputFollowsTheDeviceWhenTheHostRunsAhead) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions o;
  o.lag = 0;
  o.ring_slack = 1;  // the ring drops stage marks; the step ends are kept
  o.warmup_steps = 1;
  Profiler p(o);
  const Tensor a = square(4096);
  queue_work(a, 1);
  p.set_device(Device::cuda(0));
  const double start = now_s();
  for (int i = 0; i < 8; ++i) {
    p.begin_step();
    {
      Profiler::DeviceScope d(&p, Stage::forward);
      queue_work(a, 10);
    }
    p.end_step(64);
  }
  p.finish();
  const double end = now_s();
  const ProfileSummary s = p.summary();
  EXPECT_GE(s.device_steps_dropped, 1);
  EXPECT_EQ(s.throughput.steps, 7);
  EXPECT_EQ(s.throughput.images, 7 * 64);
  EXPECT_GT(s.throughput.seconds, 2.0 * s.totals.wall_ms * 1e-3) << "timed by the host's queueing";
  EXPECT_LE(s.throughput.seconds, end - start);
  EXPECT_EQ(p.throughput().images_per_second(), s.throughput.images_per_second());
}

}  // namespace
}  // namespace liftoff
