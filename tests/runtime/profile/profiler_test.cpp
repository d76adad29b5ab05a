// Profiler, thread CPU accounting and the sampler on the CPU: stage times add up to the measured step wall
// time, warm-up and windows, misuse errors, trace spans, overhead.
#include "runtime/profile/profiler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/error.h"
#include "runtime/profile/gpu_sampler.h"
#include "runtime/profile/nvml.h"
#include "runtime/platform/cpu_usage.h"

namespace liftoff {
namespace {

using Clock = std::chrono::steady_clock;

void sleep_ms(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// Burns CPU for about `ms` milliseconds (a stand-in for compute).
void busy_ms(double ms) {
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  volatile double x = 0.0;
  while (Clock::now() < end) x = x + 1.0;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

TEST(Profiler, StageNamesRoundTrip) {
  for (int i = 0; i < kNumStages; ++i) {
    const Stage s = static_cast<Stage>(i);
    ASSERT_TRUE(stage_from_name(stage_name(s)).has_value());
    EXPECT_EQ(*stage_from_name(stage_name(s)), s);
  }
  EXPECT_FALSE(stage_from_name("compute").has_value());
  EXPECT_STREQ(stream_name(StreamKind::copy), "copy");
}

// The proof: on a synthetic loop, the timed stages account for the measured step wall time
// within 10%, and the profiler's own step wall matches an independent clock.
TEST(Profiler, StagesAddUpToMeasuredStepWall) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  double independent_ms = 0.0;
  const int steps = 12;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    p.begin_step();
    {
      Profiler::StageScope s(&p, Stage::data_wait);
      sleep_ms(2.0);
    }
    {
      Profiler::StageScope s(&p, Stage::forward);
      busy_ms(3.0);
    }
    {
      Profiler::StageScope s(&p, Stage::backward);
      busy_ms(4.0);
    }
    {
      Profiler::StageScope s(&p, Stage::optimizer);
      sleep_ms(1.0);
    }
    p.end_step(32);
    independent_ms += ms_since(t0);
  }
  const ProfileSummary s = p.summary();
  const ProfileTotals& t = s.totals;
  ASSERT_EQ(t.steps, steps);
  EXPECT_EQ(t.images, 32 * steps);
  double timed = 0.0;
  for (int i = 0; i < kNumStages; ++i) {
    if (static_cast<Stage>(i) != Stage::other) timed += t.host_ms[static_cast<size_t>(i)];
  }
  // Timed stages within 10% of the independently measured wall time.
  EXPECT_NEAR(timed / independent_ms, 1.0, 0.10)
      << "timed " << timed << " ms, wall " << independent_ms << " ms";
  EXPECT_NEAR(t.wall_ms / independent_ms, 1.0, 0.10);
  // Stages + other = wall exactly (other is the remainder).
  EXPECT_NEAR(timed + t.host_ms[static_cast<size_t>(Stage::other)], t.wall_ms, 1e-6 * t.wall_ms);
  // Each stage got about what it did (sleeps only ever overshoot).
  EXPECT_GE(t.host_ms[static_cast<size_t>(Stage::data_wait)], 2.0 * steps);
  EXPECT_GE(t.host_ms[static_cast<size_t>(Stage::backward)], 4.0 * steps);
  EXPECT_GE(t.host_ms[static_cast<size_t>(Stage::forward)], 3.0 * steps);
  EXPECT_EQ(t.host_calls[static_cast<size_t>(Stage::forward)], steps);
  EXPECT_LE(t.wall_ms_min, t.wall_ms_max);
  EXPECT_FALSE(s.device_timing);
  EXPECT_EQ(t.device_steps, 0);
}

TEST(Profiler, UntimedWorkLandsInOther) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  for (int i = 0; i < 5; ++i) {
    p.begin_step();
    {
      Profiler::StageScope s(&p, Stage::forward);
      busy_ms(1.0);
    }
    sleep_ms(3.0);  // e.g. logging: no stage
    p.end_step(1);
  }
  const ProfileTotals t = p.summary().totals;
  EXPECT_GE(t.host_ms[static_cast<size_t>(Stage::other)], 3.0 * 5);
  EXPECT_LT(t.host_ms[static_cast<size_t>(Stage::forward)], t.host_ms[static_cast<size_t>(Stage::other)]);
}

TEST(Profiler, MicroBatchesAccumulateIntoOneStep) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  for (int micro = 0; micro < 4; ++micro) {
    p.begin_step();  // no-op after the first: the step stays open
    Profiler::StageScope s(&p, Stage::forward);
    sleep_ms(0.5);
  }
  p.end_step(64);
  const ProfileTotals t = p.summary().totals;
  EXPECT_EQ(t.steps, 1);
  EXPECT_EQ(t.host_calls[static_cast<size_t>(Stage::forward)], 4);
  EXPECT_GE(t.host_ms[static_cast<size_t>(Stage::forward)], 2.0);
}

TEST(Profiler, WarmupStepsAreLeftOutUnlessTheyAreAll) {
  ProfilerOptions o;
  o.warmup_steps = 3;
  Profiler p(o);
  for (int i = 0; i < 2; ++i) {
    p.begin_step();
    p.end_step(10);
  }
  ProfileSummary s = p.summary();
  EXPECT_EQ(s.totals.steps, 2);  // fewer steps than the warm-up: all of them are reported
  EXPECT_EQ(s.warmup_excluded, 0);
  for (int i = 0; i < 5; ++i) {
    p.begin_step();
    p.end_step(10);
  }
  s = p.summary();
  EXPECT_EQ(s.steps_total, 7);
  EXPECT_EQ(s.totals.steps, 4);
  EXPECT_EQ(s.warmup_excluded, 3);
  EXPECT_EQ(s.totals.images, 40);
  EXPECT_EQ(s.all_steps_images, 70);
  EXPECT_GE(s.all_steps_wall_ms, s.totals.wall_ms);
}

TEST(Profiler, WarmupEndHookRunsOnceAfterTheLastWarmupStep) {
  ProfilerOptions o;
  o.warmup_steps = 3;
  int calls = 0;
  int64_t steps_when_called = -1;
  Profiler* profiler = nullptr;
  o.on_warmup_end = [&] {
    ++calls;
    steps_when_called = profiler->summary().steps_total;
  };
  Profiler p(o);
  profiler = &p;
  for (int i = 0; i < 6; ++i) {
    p.begin_step();
    p.end_step(1);
    EXPECT_EQ(calls, i >= 2 ? 1 : 0) << "after step " << i;
  }
  EXPECT_EQ(steps_when_called, 3);
}

TEST(Profiler, AbandonedStepIsNotCounted) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  p.begin_step();
  { Profiler::StageScope s(&p, Stage::data_wait); }
  p.abandon_step();
  EXPECT_FALSE(p.in_step());
  EXPECT_EQ(p.summary().steps_total, 0);
  p.abandon_step();  // no open step: no-op
}

TEST(Profiler, MisuseIsAnError) {
  Profiler p;
  EXPECT_THROW(p.begin_host_stage(Stage::forward), ValueError);  // outside a step
  EXPECT_THROW(p.end_step(1), ValueError);
  p.begin_step();
  EXPECT_THROW(p.begin_host_stage(Stage::other), ValueError);  // computed, not timed
  p.begin_host_stage(Stage::forward);
  EXPECT_THROW(p.begin_host_stage(Stage::backward), ValueError);  // nested
  EXPECT_THROW(p.end_host_stage(Stage::backward), ValueError);    // not the open one
  EXPECT_THROW(p.end_step(1), ValueError);                        // a stage is still open
  p.end_host_stage(Stage::forward);
  EXPECT_THROW(p.finish(), ValueError);  // inside a step
  p.end_step(1);
  EXPECT_NO_THROW(p.finish());
  ProfilerOptions negative_lag;
  negative_lag.lag = -1;
  EXPECT_THROW(Profiler{negative_lag}, ValueError);
}

TEST(Profiler, DeviceMarksAreNoOpsOnTheCpu) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  p.set_device(Device::cpu());
  p.begin_step();
  {
    Profiler::DeviceScope d(&p, Stage::forward);
    Profiler::DeviceScope c(&p, Stage::h2d, StreamKind::copy);
  }
  p.end_step(1);
  p.finish();
  const ProfileSummary s = p.summary();
  EXPECT_FALSE(s.device_timing);
  EXPECT_EQ(s.totals.device_steps, 0);
  EXPECT_EQ(s.totals.device_marks[static_cast<size_t>(Stage::forward)], 0);
}

TEST(Profiler, NullProfilerScopesDoNothing) {
  Profiler::StageScope s(nullptr, Stage::forward);
  Profiler::DeviceScope d(nullptr, Stage::backward);
  SUCCEED();
}

TEST(Profiler, WindowsMergeContiguousStepsAndSplitAtPauses) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  Profiler p(o);
  for (int i = 0; i < 3; ++i) {
    p.begin_step();
    sleep_ms(1.0);
    p.end_step(1);
  }
  sleep_ms(700.0);  // an evaluation pass, say: longer than the 0.5 s merge gap
  p.begin_step();
  sleep_ms(1.0);
  p.end_step(1);
  const auto w = p.summary().windows;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_LT(w[0].first, w[0].second);
  EXPECT_GE(w[1].first - w[0].second, 0.69);
}

TEST(Profiler, TraceKeepsHostSpansAndWorkerSpans) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  o.keep_trace = true;
  o.trace_max_steps = 3;
  Profiler p(o);
  for (int i = 0; i < 5; ++i) {
    p.begin_step();
    { Profiler::StageScope s(&p, Stage::data_wait); }
    { Profiler::StageScope s(&p, Stage::forward); }
    p.end_step(1);
  }
  int64_t worker_tid = 0;
  std::thread worker([&] {
    worker_tid = platform::current_thread_id();
    const auto t0 = Clock::now();
    p.record_thread_span("load batch", t0, t0 + std::chrono::milliseconds(1));
  });
  worker.join();
  const std::vector<TraceSpan> spans = p.trace_spans();
  int steps = 0, forward = 0, load = 0;
  for (const TraceSpan& s : spans) {
    EXPECT_LE(s.begin_s, s.end_s);
    EXPECT_FALSE(s.device);
    if (std::string(s.name) == "step") ++steps;
    if (std::string(s.name) == "forward") {
      ++forward;
      EXPECT_EQ(s.tid, p.main_thread_id());
      EXPECT_LT(s.step, 3);
    }
    if (std::string(s.name) == "load batch") {
      ++load;
      EXPECT_EQ(s.tid, worker_tid);
      EXPECT_EQ(s.step, -1);
    }
  }
  EXPECT_EQ(steps, 3);  // trace_max_steps
  EXPECT_EQ(forward, 3);
  EXPECT_EQ(load, 1);
}

TEST(Profiler, TraceIsEmptyUnlessAsked) {
  Profiler p;
  p.begin_step();
  { Profiler::StageScope s(&p, Stage::forward); }
  p.end_step(1);
  p.record_thread_span("x", Clock::now(), Clock::now());
  EXPECT_TRUE(p.trace_spans().empty());
}

// Overhead sanity: a host stage scope costs two clock reads and a few adds.
TEST(Profiler, HostScopeOverheadIsSmall) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  o.keep_trace = false;
  Profiler p(o);
  constexpr int kSteps = 20000;
  const auto t0 = Clock::now();
  for (int i = 0; i < kSteps; ++i) {
    p.begin_step();
    for (Stage s : {Stage::data_wait, Stage::forward, Stage::backward, Stage::optimizer}) {
      Profiler::StageScope scope(&p, s);
    }
    p.end_step(1);
  }
  const double us_per_step = 1e3 * ms_since(t0) / kSteps;
  // Generous bound for a shared CI machine; a step of a real run is milliseconds.
  EXPECT_LT(us_per_step, 20.0) << us_per_step << " us per step of 4 scopes";
}

// --- thread CPU accounting -------------------------------------------------------------------------------

const platform::ThreadCpu* find_thread(const std::vector<platform::ThreadCpu>& all, const std::string& name) {
  for (const auto& t : all) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(CpuUsage, RegisteredThreadsReportTheirCpuTime) {
  std::atomic<bool> worked{false};
  std::atomic<bool> release{false};
  std::thread busy([&] {
    platform::ThreadRegistration reg("test-busy");
    // 150 ms of this thread's own CPU time (the machine may be shared: wall time would not do).
    const double start = platform::current_thread_cpu_seconds();
    volatile double x = 0.0;
    while (platform::current_thread_cpu_seconds() - start < 0.15) x = x + 1.0;
    worked = true;
    while (!release) sleep_ms(1.0);
  });
  std::thread idle([&] {
    platform::ThreadRegistration reg("test-idle");
    while (!release) sleep_ms(5.0);
  });
  while (!worked) sleep_ms(1.0);
  const auto live = platform::registered_thread_cpu();
  const auto* b = find_thread(live, "test-busy");
  const auto* i = find_thread(live, "test-idle");
  ASSERT_NE(b, nullptr);
  ASSERT_NE(i, nullptr);
  EXPECT_TRUE(b->alive);
  EXPECT_GE(b->cpu_seconds, 0.13);  // 150 ms of CPU, counted in 10 ms ticks
  EXPECT_LT(i->cpu_seconds, b->cpu_seconds);
  release = true;
  busy.join();
  idle.join();
  // Exited threads keep their final CPU time.
  const auto after = platform::registered_thread_cpu();
  const auto* b2 = find_thread(after, "test-busy");
  ASSERT_NE(b2, nullptr);
  EXPECT_FALSE(b2->alive);
  EXPECT_GE(b2->cpu_seconds, 0.15);  // the thread's own clock at exit
}

TEST(CpuUsage, ProcessFigures) {
  busy_ms(20.0);
  EXPECT_GT(platform::process_cpu_seconds(), 0.0);
  EXPECT_GT(platform::current_thread_cpu_seconds(), 0.0);
  EXPECT_GT(platform::peak_rss_bytes(), 1 << 20);
  EXPECT_GE(platform::peak_rss_bytes(), platform::current_rss_bytes());
  EXPECT_GE(platform::host_cores(), 1);
  EXPECT_GT(platform::current_thread_id(), 0);
}

// --- sampler ---------------------------------------------------------------------------------------------

TEST(GpuSampler, CpuDeviceSamplesThreadsOnly) {
  GpuSamplerOptions o;
  o.cpu_interval_s = 0.02;
  GpuSampler s(Device::cpu(), o);
  EXPECT_FALSE(s.available());
  EXPECT_EQ(s.unavailable_reason(), "the device is the CPU");
  platform::register_current_thread("main");
  s.start();
  s.start();  // idempotent
  sleep_ms(100.0);
  s.stop();
  s.stop();
  EXPECT_TRUE(s.gpu_samples().empty());
  EXPECT_FALSE(s.latest().has_value());
  const auto cpu = s.cpu_samples();
  ASSERT_GE(cpu.size(), 3u);
  for (size_t i = 1; i < cpu.size(); ++i) EXPECT_GE(cpu[i].t, cpu[i - 1].t);
  EXPECT_NE(find_thread(cpu.back().threads, "main"), nullptr);
  const GpuUtilization u = s.summary();
  EXPECT_FALSE(u.available);
  EXPECT_EQ(u.samples, 0);
}

TEST(GpuSampler, BufferStaysBounded) {
  GpuSamplerOptions o;
  o.cpu_interval_s = 0.001;
  o.max_cpu_samples = 16;
  GpuSampler s(Device::cpu(), o);
  s.start();
  sleep_ms(150.0);
  s.stop();
  const auto cpu = s.cpu_samples();
  EXPECT_LE(cpu.size(), 16u);
  EXPECT_GE(cpu.size(), 4u);
}

TEST(GpuSampler, WithoutNvmlTheReasonIsNvmls) {
  if (Nvml::get().available()) GTEST_SKIP() << "NVML is present here";
  GpuSampler s(Device::cuda(0));
  EXPECT_FALSE(s.available());
  EXPECT_EQ(s.unavailable_reason(), Nvml::get().unavailable_reason());
  EXPECT_FALSE(s.unavailable_reason().empty());
  s.start();
  s.stop();
  EXPECT_TRUE(s.gpu_samples().empty());
  EXPECT_EQ(s.summary().reason, Nvml::get().unavailable_reason());
}

}  // namespace
}  // namespace liftoff
