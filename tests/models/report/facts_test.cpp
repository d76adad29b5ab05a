// The facts a verdict weighs, computed once from recorded reports: shares, the GPU busy figure and its
// source, the copy's time, workers, and whether the device runs behind the host (and why).
#include "models/report/facts.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using report_testing::cuda_report;
using report_testing::stage;

TEST(VerdictFacts, SharesOfTheStep) {
  RunReport r = cuda_report();
  stage(r, Stage::data_wait).host_ms = 1.0;
  const VerdictFacts f = compute_facts(r);
  EXPECT_TRUE(f.measured);
  EXPECT_TRUE(f.cuda);
  EXPECT_DOUBLE_EQ(f.wall_ms, 20.0);
  EXPECT_EQ(f.step_text, "step 20.00 ms");
  EXPECT_DOUBLE_EQ(f.wait_ms, 1.0);
  EXPECT_DOUBLE_EQ(f.wait_share, 0.05);
  EXPECT_DOUBLE_EQ(f.compute_ms, 17.5);
  EXPECT_DOUBLE_EQ(f.compute_share, 0.875);
  EXPECT_DOUBLE_EQ(f.other_share, 0.1);
  EXPECT_FALSE(f.has_h2d);  // no copy-stream time, no host copy
  EXPECT_FALSE(f.has_comm);
  EXPECT_EQ(f.shares_text, "data wait 5% of the step 20.00 ms");
  stage(r, Stage::h2d).device_ms = 2.0;
  EXPECT_EQ(compute_facts(r).shares_text, "data wait 5%, H2D copies 10% of the step 20.00 ms");
}

TEST(VerdictFacts, NothingMeasuredHasNoShares) {
  RunReport r;
  r.config.device = "cuda:0";
  const VerdictFacts f = compute_facts(r);
  EXPECT_FALSE(f.measured);
  EXPECT_TRUE(f.cuda);
  EXPECT_EQ(f.wait_share, 0.0);  // not NaN: nothing is divided by a zero step
  EXPECT_FALSE(f.busy.has_value());
  EXPECT_TRUE(f.busy_text.empty());
}

TEST(VerdictFacts, GpuBusyPrefersEventsAndTakesTheLowerNvmlFigure) {
  RunReport r = cuda_report();  // events 95%, NVML 97% (50 samples)
  VerdictFacts f = compute_facts(r);
  ASSERT_TRUE(f.busy.has_value());
  EXPECT_DOUBLE_EQ(*f.busy, 0.95);
  EXPECT_EQ(f.busy_text, "GPU busy 95% of the step (CUDA events), NVML utilization 97%");
  // Seen on the H200: event spans of 97% but NVML 10% (launch-bound): the lower figure wins.
  r.gpu.util_mean_pct = 10.0;
  f = compute_facts(r);
  EXPECT_DOUBLE_EQ(*f.busy, 0.10);
  EXPECT_NE(f.busy_text.find("(the lower figure is used)"), std::string::npos) << f.busy_text;
  // Too few NVML samples: named, not used.
  r.gpu.samples = 3;
  f = compute_facts(r);
  EXPECT_DOUBLE_EQ(*f.busy, 0.95);
  EXPECT_NE(f.busy_text.find("NVML 3 sample(s) only, not used"), std::string::npos) << f.busy_text;
  // NVML alone.
  r.device_busy_pct.reset();
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 91.0;
  f = compute_facts(r);
  EXPECT_DOUBLE_EQ(*f.busy, 0.91);
  EXPECT_EQ(f.busy_text, "GPU utilization 91% (NVML, 50 samples; no CUDA event timings)");
  // Neither: no figure, and the text says why.
  r.gpu = GpuUtilization{};
  f = compute_facts(r);
  EXPECT_FALSE(f.busy.has_value());
  EXPECT_EQ(f.busy_text, "GPU busy not measured (no CUDA event timings; NVML: not sampled)");
  // A CPU run has no GPU figure to describe.
  r.config.device = "cpu";
  EXPECT_TRUE(compute_facts(r).busy_text.empty());
}

// Recorded on the H200 (strided_cnn, --no-pin-memory): the training thread spent 10.5 ms/step issuing copies
// from pageable memory while the copy stream took 4.2 ms: the thread's time is the copy's.
TEST(VerdictFacts, CopyOnTheTrainingThreadCountsWhenLonger) {
  RunReport r = cuda_report();
  r.step_ms_mean = 18.29;
  stage(r, Stage::h2d).host_ms = 10.5;
  stage(r, Stage::h2d).device_ms = 4.2;
  VerdictFacts f = compute_facts(r);
  EXPECT_TRUE(f.has_h2d);
  EXPECT_TRUE(f.host_copy);
  EXPECT_DOUBLE_EQ(f.h2d_ms, 10.5);
  EXPECT_NEAR(f.h2d_share, 10.5 / 18.29, 1e-12);
  // Pinned: issuing takes microseconds, the copy stream's time stands.
  stage(r, Stage::h2d).host_ms = 0.02;
  f = compute_facts(r);
  EXPECT_FALSE(f.host_copy);
  EXPECT_DOUBLE_EQ(f.h2d_ms, 4.2);
  // On the CPU there is no copy.
  r.config.device = "cpu";
  stage(r, Stage::h2d).device_ms.reset();
  stage(r, Stage::h2d).host_ms = 3.0;
  EXPECT_FALSE(compute_facts(r).has_h2d);
}

TEST(VerdictFacts, ExposedAllReduceFromDeviceOrCpuHostWait) {
  RunReport r = cuda_report();
  stage(r, Stage::allreduce).host_ms = 3.0;  // a CUDA run's host time is not the exposed time
  EXPECT_FALSE(compute_facts(r).has_comm);
  r.allreduce_exposed_ms = 6.0;
  VerdictFacts f = compute_facts(r);
  EXPECT_TRUE(f.has_comm);
  EXPECT_DOUBLE_EQ(f.comm_share, 0.3);
  r.allreduce_exposed_ms.reset();
  r.config.device = "cpu";  // MPI: the host wait is what is known
  f = compute_facts(r);
  EXPECT_TRUE(f.has_comm);
  EXPECT_DOUBLE_EQ(f.comm_ms, 3.0);
}

TEST(VerdictFacts, WorkersFromLoaderBusyTimeElseThreadCpu) {
  RunReport r = cuda_report();
  VerdictFacts f = compute_facts(r);
  EXPECT_FALSE(f.workers_busy.has_value());
  EXPECT_EQ(f.workers_text, "worker busy time not available");
  r.workers_cpu_pct_mean = 60.0;
  f = compute_facts(r);
  EXPECT_DOUBLE_EQ(*f.workers_busy, 0.6);
  EXPECT_EQ(f.workers_text, "4 workers used 60% CPU each (mean)");
  r.loader.present = true;
  r.loader.worker_busy_pct = {98, 99, 97, 98};
  r.loader.worker_busy_pct_mean = 98.0;
  f = compute_facts(r);
  EXPECT_DOUBLE_EQ(*f.workers_busy, 0.98);
  EXPECT_EQ(f.workers_text, "4 workers were 98% busy (loader busy time)");
  r = cuda_report();
  r.config.workers = 0;
  EXPECT_EQ(compute_facts(r).workers_text, "batches are made on the training thread");
}

// Recorded on the H200 (simple_cnn, batch 16, graphs): 4.45 ms behind in a 0.27 ms step with events covering
// it, 60 graph nodes (0.15 ms at 2.5 us each): latency, not compute.
TEST(VerdictFacts, DeviceBehindWithTinyKernelsIsLatencyElseBackPressure) {
  RunReport r = cuda_report();
  r.step_ms_mean = 0.27;
  r.device_busy_pct = 100.0;
  r.gpu.samples = 1;
  r.device_lag_ms = 4.45;
  r.graphs.used = true;
  r.graphs.nodes = 60;
  VerdictFacts f = compute_facts(r);
  EXPECT_TRUE(f.device_behind);
  EXPECT_TRUE(f.inside_marks);
  EXPECT_FALSE(f.sms_idle);  // one NVML sample is not enough to say
  EXPECT_NEAR(f.node_floor_ms, 0.15, 1e-12);
  EXPECT_TRUE(f.many_nodes);
  EXPECT_TRUE(f.latency_bound);
  EXPECT_FALSE(f.back_pressure);
  // The same nodes on two concurrent streams: one path's floor is half, the device does real work.
  r.graphs.streams = 2;
  f = compute_facts(r);
  EXPECT_NEAR(f.node_floor_ms, 0.075, 1e-12);
  EXPECT_FALSE(f.latency_bound);
  EXPECT_TRUE(f.back_pressure);
  // NVML (enough samples) finding the SMs idle says latency too.
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 2.0;
  f = compute_facts(r);
  EXPECT_TRUE(f.sms_idle);
  EXPECT_TRUE(f.latency_bound);
  // Marks covering little of the step: the device waits outside our work, neither.
  r.device_busy_pct = 30.0;
  f = compute_facts(r);
  EXPECT_FALSE(f.inside_marks);
  EXPECT_FALSE(f.latency_bound);
  EXPECT_FALSE(f.back_pressure);
  // A lag shorter than the step is not behind.
  r.device_busy_pct = 100.0;
  r.device_lag_ms = 0.2;
  EXPECT_FALSE(compute_facts(r).device_behind);
}

}  // namespace
}  // namespace liftoff
