// The utilization report: verdict rules on recorded timings, the JSON schema (round trip, required fields and
// types), the trace file, the metrics log, and a real CPU run through RunMonitor.
#include "models/report/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "data/loader.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

using json = nlohmann::json;

StageReport& stage(RunReport& r, Stage s) {
  return r.stages[static_cast<size_t>(s)];
}

// A CUDA run of 20 ms steps with 2 ms of "other"; the caller moves time between stages.
RunReport cuda_report() {
  RunReport r;
  r.config.device = "cuda:0";
  r.config.batch = 128;
  r.config.accum = 1;
  r.config.amp = "off";
  r.config.augment = "gpu";
  r.config.workers = 4;
  r.config.prefetch = 8;
  r.config.pin_memory = true;
  r.config.host_cores = 16;
  r.steps_total = 105;
  r.steps_measured = 100;
  r.step_ms_mean = 20.0;
  r.images_per_second = 6400.0;
  stage(r, Stage::data_wait).host_ms = 0.5;
  stage(r, Stage::forward).host_ms = 5.0;
  stage(r, Stage::backward).host_ms = 10.0;
  stage(r, Stage::optimizer).host_ms = 2.5;
  stage(r, Stage::other).host_ms = 2.0;
  r.device_timing = true;
  r.device_steps = 100;
  r.device_busy_pct = 95.0;
  r.device_lag_ms = 15.0;
  r.gpu.available = true;
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 97.0;
  for (auto& s : r.stages) s.host_share = s.host_ms / r.step_ms_mean;
  return r;
}

TEST(Verdict, ComputeBound) {
  RunReport r = cuda_report();
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound");
  EXPECT_EQ(v.suggestion, "--amp bf16");
  EXPECT_NE(v.evidence.find("GPU busy 95%"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("NVML utilization 97%"), std::string::npos) << v.evidence;
  r.config.amp = "bf16";
  v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound");
  EXPECT_EQ(v.suggestion, "");
}

// Recorded on the H200 (resnet20, batch 256, bf16, CUDA graphs): the host waited 98% of the step in next()
// with idle workers because the device ran 82 ms behind and had not released the loader's buffers.
TEST(Verdict, DataWaitBehindABusyDeviceIsBackPressureNotInput) {
  RunReport r = cuda_report();
  r.step_ms_mean = 4.605;
  r.stages[static_cast<size_t>(Stage::data_wait)].host_ms = 4.529;
  r.device_busy_pct = 100.0;
  r.gpu.util_mean_pct = 84.0;
  r.device_lag_ms = 82.21;
  r.loader.worker_busy_pct_mean = 0.0;
  r.config.amp = "bf16";
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound") << v.evidence;
  EXPECT_NE(v.evidence.find("back-pressure"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("82.21 ms behind"), std::string::npos) << v.evidence;
  // The same wait with the device keeping up (no lag) is a slow input.
  r.device_lag_ms = 0.02;
  r.device_busy_pct = 20.0;
  r.gpu.util_mean_pct = 20.0;
  EXPECT_EQ(diagnose(r).kind, "input-bound");
}

// Recorded on the H200 (simple_cnn, batch 16, CUDA graphs): the device ran 4.45 ms behind the host with our
// marks covering the whole step, but NVML saw 2% utilization: tiny kernels, not compute; the data wait is the
// loader waiting for buffers the device has not released.
TEST(Verdict, DeviceBehindWithIdleSmsIsLaunchBoundNotComputeOrInput) {
  RunReport r = cuda_report();
  r.config.batch = 16;
  r.step_ms_mean = 0.27;
  r.stages[static_cast<size_t>(Stage::data_wait)].host_ms = 0.248;
  r.stages[static_cast<size_t>(Stage::forward)].host_ms = 0.005;
  r.stages[static_cast<size_t>(Stage::backward)].host_ms = 0.005;
  r.stages[static_cast<size_t>(Stage::optimizer)].host_ms = 0.002;
  r.stages[static_cast<size_t>(Stage::other)].host_ms = 0.01;
  r.device_busy_pct = 100.0;
  r.gpu.util_mean_pct = 1.0;
  r.gpu.samples = 1;  // a 0.1 s run: one NVML sample, not used
  r.device_lag_ms = 4.45;
  r.graphs.used = true;
  r.graphs.nodes = 60;  // x 2.5 us = 0.15 ms of a 0.27 ms step
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "host/launch-bound") << v.evidence;
  EXPECT_NE(v.evidence.find("too little work per kernel"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("60 nodes"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("back-pressure"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("1 sample(s) only"), std::string::npos) << v.evidence;
  EXPECT_EQ(v.suggestion, "--batch 32");
  // No NVML at all (MIG, no driver library): the node count alone still tells latency from compute.
  r.gpu.available = false;
  r.gpu.samples = 0;
  EXPECT_EQ(diagnose(r).kind, "host/launch-bound");
  // A small data wait is not called back-pressure.
  r.stages[static_cast<size_t>(Stage::data_wait)].host_ms = 0.01;
  r.stages[static_cast<size_t>(Stage::other)].host_ms = 0.248;
  v = diagnose(r);
  EXPECT_EQ(v.kind, "host/launch-bound") << v.evidence;
  EXPECT_EQ(v.evidence.find("back-pressure"), std::string::npos) << v.evidence;
  r.stages[static_cast<size_t>(Stage::data_wait)].host_ms = 0.248;
  r.stages[static_cast<size_t>(Stage::other)].host_ms = 0.01;
  r.gpu.available = true;
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 2.0;
  // Behind, but our marks cover little of the step: the device waits outside our work (for inputs).
  r.device_busy_pct = 30.0;
  EXPECT_EQ(diagnose(r).kind, "input-bound");
}

// Recorded on the H200 (resnet56, batch 1024, CUDA graphs, 30 steps): NVML's 68% is below the busy threshold
// but far from idle, and the device ran 467 ms behind: compute-bound, the data wait is back-pressure.
TEST(Verdict, DeviceFarBehindWithBusySmsIsComputeBound) {
  RunReport r = cuda_report();
  r.config.batch = 1024;
  r.step_ms_mean = 12.98;
  r.stages[static_cast<size_t>(Stage::data_wait)].host_ms = 12.85;
  r.device_busy_pct = 100.0;
  r.gpu.util_mean_pct = 68.0;
  r.device_lag_ms = 466.92;
  r.gpu.samples = 4;  // too few: NVML not used, the events' 100% is
  r.graphs.used = true;
  r.graphs.nodes = 1203;  // x 2.5 us = 3.0 ms of a 13 ms step: not latency
  const Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound") << v.evidence;
  EXPECT_NE(v.evidence.find("back-pressure"), std::string::npos) << v.evidence;
}

TEST(Verdict, InputBoundSuggestsMoreWorkersWhenTheyAreBusy) {
  RunReport r = cuda_report();
  stage(r, Stage::data_wait).host_ms = 12.2;
  r.device_busy_pct = 35.0;
  r.loader.present = true;
  r.loader.worker_busy_pct = {98, 99, 97, 98};
  r.loader.worker_busy_pct_mean = 98.0;
  r.loader.cpu_augment_share = 0.0;
  const Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "input-bound");
  EXPECT_EQ(v.rule, "R2 input");
  EXPECT_EQ(v.suggestion, "--workers 8");
  EXPECT_NE(v.evidence.find("61%"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("4 workers were 98% busy"), std::string::npos) << v.evidence;
}

TEST(Verdict, InputBoundVariants) {
  RunReport r = cuda_report();
  stage(r, Stage::data_wait).host_ms = 8.0;  // 40%
  r.loader.present = true;
  r.loader.worker_busy_pct = {90, 90, 90, 90};
  r.loader.worker_busy_pct_mean = 90.0;
  // CPU augmentation dominating the workers' time: move it to the GPU.
  r.config.augment = "cpu";
  r.loader.cpu_augment_share = 0.6;
  EXPECT_EQ(diagnose(r).suggestion, "--augment gpu");
  // Workers already on every core.
  r.config.augment = "gpu";
  r.loader.cpu_augment_share = 0.0;
  r.config.workers = 15;
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "input-bound");
  EXPECT_EQ(v.suggestion, "");
  EXPECT_NE(v.evidence.find("every core (16)"), std::string::npos) << v.evidence;
  // Idle workers but a late batch: deeper prefetch.
  r.config.workers = 4;
  r.loader.worker_busy_pct_mean = 40.0;
  EXPECT_EQ(diagnose(r).suggestion, "--prefetch 16");
  // Synchronous batches on the training thread.
  r.config.workers = 0;
  r.loader = LoaderReport{};
  EXPECT_EQ(diagnose(r).suggestion, "--workers 8");
}

TEST(Verdict, InputThresholdIsRespected) {
  RunReport r = cuda_report();
  stage(r, Stage::data_wait).host_ms = 0.19 * 20.0;  // just under 20%
  EXPECT_NE(diagnose(r).kind, "input-bound");
  stage(r, Stage::data_wait).host_ms = 0.21 * 20.0;
  EXPECT_EQ(diagnose(r).kind, "input-bound");
  VerdictThresholds th;
  th.input_share = 0.25;
  EXPECT_NE(diagnose(r, th).kind, "input-bound");
}

TEST(Verdict, CopyBound) {
  RunReport r = cuda_report();
  stage(r, Stage::h2d).device_ms = 8.0;  // 40% of the step on the copy stream
  r.device_busy_pct = 50.0;
  r.loader.present = true;
  r.loader.h2d_gb_per_s = 2.9;
  r.config.pin_memory = false;
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "copy-bound");
  EXPECT_EQ(v.suggestion, "--pin-memory");
  EXPECT_NE(v.evidence.find("8.00 ms/step (40%"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("2.9 GB/s"), std::string::npos) << v.evidence;
  r.config.pin_memory = true;
  r.config.augment = "cpu";
  EXPECT_EQ(diagnose(r).suggestion, "--augment gpu");
  // The same copies fully hidden behind a busy GPU are not the bottleneck.
  r.device_busy_pct = 92.0;
  EXPECT_EQ(diagnose(r).kind, "compute-bound");
}

TEST(Verdict, HostLaunchBound) {
  RunReport r = cuda_report();
  r.config.batch = 64;
  r.device_busy_pct = 34.0;
  r.device_lag_ms = 0.12;
  r.gpu.util_mean_pct = 30.0;
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "host/launch-bound");
  EXPECT_EQ(v.suggestion, "--batch 128");
  EXPECT_NE(v.evidence.find("GPU busy 34%"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("0.12 ms after the host"), std::string::npos) << v.evidence;
  // No memory room for a larger batch (or already large): CUDA graphs.
  r.device_memory_peak_reserved = int64_t{60} << 30;
  r.device_memory_total = int64_t{80} << 30;
  EXPECT_EQ(diagnose(r).suggestion, "CUDA graphs");
  r.device_memory_peak_reserved.reset();
  r.config.batch = 512;
  EXPECT_EQ(diagnose(r).suggestion, "CUDA graphs");
  // Already replaying a graph: the evidence says so and the hint is more work per launch.
  r.graphs.used = true;
  r.graphs.nodes = 812;
  v = diagnose(r);
  EXPECT_EQ(v.suggestion, "more work per launch: a larger --batch");
  EXPECT_NE(v.evidence.find("already runs as a CUDA graph (812 nodes)"), std::string::npos) << v.evidence;
}

TEST(Verdict, CommunicationBound) {
  RunReport r = cuda_report();
  r.config.world_size = 4;
  r.config.accum = 2;
  r.allreduce_exposed_ms = 6.0;
  r.allreduce_overlapped_ms = 3.0;
  r.device_busy_pct = 70.0;
  const Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "communication-bound");
  EXPECT_EQ(v.suggestion, "--accum 4");
  EXPECT_NE(v.evidence.find("6.00 ms/step exposed (30%"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("3.00 ms/step overlapped"), std::string::npos) << v.evidence;
}

TEST(Verdict, LargestShareWinsAmongInputCopyComm) {
  RunReport r = cuda_report();
  r.device_busy_pct = 40.0;
  stage(r, Stage::data_wait).host_ms = 5.0;  // 25%
  r.allreduce_exposed_ms = 8.0;              // 40%
  EXPECT_EQ(diagnose(r).kind, "communication-bound");
  stage(r, Stage::data_wait).host_ms = 10.0;  // 50%
  EXPECT_EQ(diagnose(r).kind, "input-bound");
}

TEST(Verdict, NvmlOnlyIsNamedAndMissingFiguresAreNotInvented) {
  RunReport r = cuda_report();
  r.device_busy_pct.reset();
  r.device_lag_ms.reset();
  r.gpu.util_mean_pct = 91.0;
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound");
  EXPECT_NE(v.evidence.find("(NVML, 50 samples; no CUDA event timings)"), std::string::npos) << v.evidence;
  // Neither events nor NVML: the verdict says so instead of guessing.
  r.gpu = GpuUtilization{};
  r.gpu.reason = "NVML not available (libnvidia-ml.so.1 not found: no NVIDIA driver)";
  v = diagnose(r);
  EXPECT_EQ(v.kind, "unknown");
  EXPECT_NE(v.evidence.find("libnvidia-ml.so.1 not found"), std::string::npos) << v.evidence;
  EXPECT_EQ(v.evidence.find("utilization"), std::string::npos) << v.evidence;
  EXPECT_EQ(v.suggestion, "");
}

TEST(Verdict, CpuRuns) {
  RunReport r = cuda_report();
  r.config.device = "cpu";
  r.device_timing = false;
  r.device_busy_pct.reset();
  r.device_lag_ms.reset();
  r.gpu = GpuUtilization{};
  r.config.threads = 8;
  Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "compute-bound");
  EXPECT_EQ(v.suggestion, "--threads 16");
  EXPECT_NE(v.evidence.find("88% of the step on the CPU"), std::string::npos) << v.evidence;
  r.config.cuda_available = true;
  EXPECT_EQ(diagnose(r).suggestion, "--device cuda");
  // Mostly untimed work.
  stage(r, Stage::forward).host_ms = 1.0;
  stage(r, Stage::backward).host_ms = 1.0;
  stage(r, Stage::optimizer).host_ms = 1.0;
  stage(r, Stage::other).host_ms = 16.5;
  EXPECT_EQ(diagnose(r).kind, "host/launch-bound");
}

TEST(Verdict, NoStepsIsUnknown) {
  RunReport r;
  EXPECT_EQ(diagnose(r).kind, "unknown");
  EXPECT_EQ(diagnose(r).rule, "R0 no-steps");
}

// --- assembly, JSON, table -------------------------------------------------------------------------------

RunMeasurements recorded_measurements() {
  RunMeasurements m;
  ProfileTotals& t = m.profile.totals;
  m.profile.steps_total = 12;
  m.profile.warmup_excluded = 2;
  m.profile.device_timing = true;
  m.profile.all_steps_wall_ms = 240.0;
  t.steps = 10;
  t.images = 1280;
  t.wall_ms = 200.0;
  t.wall_ms_min = 19.0;
  t.wall_ms_max = 21.0;
  t.wall_ms_sq = 10 * 400.0 + 2.0;
  t.host_ms[static_cast<size_t>(Stage::data_wait)] = 10.0;
  t.host_ms[static_cast<size_t>(Stage::forward)] = 60.0;
  t.host_ms[static_cast<size_t>(Stage::backward)] = 100.0;
  t.host_ms[static_cast<size_t>(Stage::optimizer)] = 20.0;
  t.host_ms[static_cast<size_t>(Stage::other)] = 10.0;
  t.device_steps = 8;
  t.device_wall_ms = 160.0;
  t.device_ms[static_cast<size_t>(Stage::forward)] = 40.0;
  t.device_marks[static_cast<size_t>(Stage::forward)] = 8;
  t.device_ms[static_cast<size_t>(Stage::backward)] = 80.0;
  t.device_marks[static_cast<size_t>(Stage::backward)] = 8;
  t.device_busy_ms = 120.0;
  t.device_lag_ms = 8.0;
  GpuUtilization g;
  g.available = true;
  g.samples = 30;
  g.util_mean_pct = 74.0;
  g.util_max_pct = 100.0;
  g.memory_total = uint64_t{80} << 30;
  g.memory_used_max = uint64_t{3} << 30;
  m.gpu = g;
  LoaderStats ls;
  ls.batches = 12;
  ls.images = 1536;
  ls.wait_seconds = 0.012;
  ls.worker_busy_seconds = {0.12, 0.06};
  ls.h2d_bytes = 12 * 1000000;
  ls.h2d_ms = 6.0;
  ls.h2d_timed = 12;
  ls.augment_ms = 2.4;
  ls.augment_timed = 12;
  m.loader = loader_report(ls, 0.240);
  m.device_memory_peak_allocated = int64_t{1} << 30;
  m.device_memory_peak_reserved = int64_t{3} << 29;
  m.host_peak_rss = int64_t{500} << 20;
  m.threads = {{"main", 1000, 0.2, 95.0}, {"loader-0", 1001, 0.1, 50.0}, {"loader-1", 1002, 0.05, 25.0}};
  m.cpu_source = "run";
  m.process_cpu_seconds = 0.4;
  return m;
}

RunConfig recorded_config() {
  RunConfig c;
  c.device = "cuda:0";
  c.model = "resnet20";
  c.data = "cifar10";
  c.batch = 128;
  c.workers = 2;
  c.pin_memory = true;
  c.augment = "gpu";
  c.host_cores = 8;
  return c;
}

TEST(Report, BuildFromMeasurements) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  EXPECT_EQ(r.steps_measured, 10);
  EXPECT_DOUBLE_EQ(r.step_ms_mean, 20.0);
  EXPECT_NEAR(r.step_ms_std, std::sqrt(0.2), 1e-9);
  EXPECT_DOUBLE_EQ(r.images_per_second, 6400.0);
  double share = 0.0;
  for (const StageReport& s : r.stages) share += s.host_share;
  EXPECT_NEAR(share, 1.0, 1e-12);  // host stages + other = the step
  const StageReport& fwd = r.stages[static_cast<size_t>(Stage::forward)];
  ASSERT_TRUE(fwd.device_ms.has_value());
  EXPECT_DOUBLE_EQ(*fwd.device_ms, 5.0);  // 40 ms over 8 device-timed steps
  EXPECT_DOUBLE_EQ(*fwd.device_share, 0.25);
  EXPECT_EQ(fwd.device_source, "events");
  EXPECT_FALSE(r.stages[static_cast<size_t>(Stage::optimizer)].device_ms.has_value());
  // Loader events fill h2d and augment: 0.5 ms and 0.2 ms per batch, 1 batch per step.
  const StageReport& h2d = r.stages[static_cast<size_t>(Stage::h2d)];
  ASSERT_TRUE(h2d.device_ms.has_value());
  EXPECT_DOUBLE_EQ(*h2d.device_ms, 0.5);
  EXPECT_EQ(h2d.device_source, "loader");
  ASSERT_TRUE(r.loader.h2d_gb_per_s.has_value());
  EXPECT_NEAR(*r.loader.h2d_gb_per_s, 2.0, 1e-9);  // 1 MB in 0.5 ms
  ASSERT_TRUE(r.loader.worker_busy_pct_mean.has_value());
  EXPECT_NEAR(*r.loader.worker_busy_pct_mean, 37.5, 1e-9);  // (0.12 + 0.06) / 2 / 0.24 s
  // Busy: 15 ms union per device step + 0.2 ms loader kernel, over 20 ms.
  ASSERT_TRUE(r.device_busy_pct.has_value());
  EXPECT_NEAR(*r.device_busy_pct, 76.0, 1e-9);
  EXPECT_DOUBLE_EQ(*r.device_lag_ms, 1.0);
  EXPECT_FALSE(r.allreduce_exposed_ms.has_value());
  EXPECT_EQ(*r.device_memory_total, int64_t{80} << 30);  // from NVML
  EXPECT_DOUBLE_EQ(*r.main_thread_cpu_pct, 95.0);
  EXPECT_DOUBLE_EQ(*r.workers_cpu_pct_mean, 37.5);
  EXPECT_EQ(r.verdict.kind, "host/launch-bound");  // 76% busy, 5% data wait
  EXPECT_EQ(r.verdict.suggestion, "--batch 256");
}

// Shaped like the H200 plant (strided_cnn on 224 px JPEGs, batch 128, 14 workers, --no-pin-memory --augment
// cpu): the training thread waited 16.12 of 18.29 ms/step inside next() while the workers were 45% busy and
// the GPU 26%; pinning the same run made it 1.47x faster. The wait was the thread copying 77 MB from pageable
// memory: next() reports that issue time, which moves from data_wait to h2d and makes the run copy-bound.
TEST(Report, PageableCopyOnTheTrainingThreadIsCopyBoundNotInputBound) {
  RunMeasurements m;
  ProfileTotals& t = m.profile.totals;
  m.profile.steps_total = 48;
  m.profile.device_timing = true;
  t.steps = 40;
  t.images = 40 * 128;
  t.wall_ms = 40 * 18.29;
  t.wall_ms_min = 17.0;
  t.wall_ms_max = 20.0;
  t.wall_ms_sq = 40 * 18.29 * 18.29;
  t.host_ms[static_cast<size_t>(Stage::data_wait)] = 40 * 16.12;
  t.host_ms[static_cast<size_t>(Stage::other)] = 40 * 2.17;
  t.device_steps = 40;
  t.device_wall_ms = 40 * 18.29;
  t.device_ms[static_cast<size_t>(Stage::forward)] = 40 * 1.6;
  t.device_marks[static_cast<size_t>(Stage::forward)] = 40;
  t.device_ms[static_cast<size_t>(Stage::backward)] = 40 * 3.2;
  t.device_marks[static_cast<size_t>(Stage::backward)] = 40;
  t.device_busy_ms = 40 * 4.8;
  t.device_lag_ms = 40 * 2.0;
  LoaderStats ls;
  ls.batches = 48;
  ls.images = 48 * 128;
  ls.worker_busy_seconds.assign(14, 0.45 * 0.7316);
  ls.h2d_bytes = int64_t{48} * 128 * 3 * 224 * 224 * 4;
  ls.h2d_issue_seconds = 48 * 0.0105;
  ls.h2d_ms = 48 * 4.2;
  ls.h2d_timed = 48;
  m.loader = loader_report(ls, 0.7316);
  RunConfig c = recorded_config();
  c.model = "strided_cnn";
  c.workers = 14;
  c.pin_memory = false;
  c.augment = "cpu";
  c.host_cores = 16;
  const RunReport r = build_report(c, m);
  const StageReport& wait = r.stages[static_cast<size_t>(Stage::data_wait)];
  const StageReport& copy = r.stages[static_cast<size_t>(Stage::h2d)];
  EXPECT_NEAR(copy.host_ms, 10.5, 1e-9);
  EXPECT_NEAR(wait.host_ms, 16.12 - 10.5, 1e-9);
  double share = 0.0;
  for (const StageReport& s : r.stages) share += s.host_share;
  EXPECT_NEAR(share, 1.0, 1e-9);  // moved, not added
  EXPECT_EQ(r.verdict.kind, "copy-bound") << r.verdict.evidence;
  EXPECT_EQ(r.verdict.suggestion, "--pin-memory");
  EXPECT_NE(r.verdict.evidence.find("10.50 ms/step (57%"), std::string::npos) << r.verdict.evidence;
  EXPECT_NE(r.verdict.evidence.find("from pageable memory"), std::string::npos) << r.verdict.evidence;
  // Pinned, issuing takes microseconds: the same wait would be the workers' (input-bound).
  ls.h2d_issue_seconds = 48 * 0.00002;
  m.loader = loader_report(ls, 0.7316);
  c.pin_memory = true;
  EXPECT_EQ(build_report(c, m).verdict.kind, "input-bound");
}

TEST(Report, JsonRoundTripKeepsEveryField) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  const std::string text = r.to_json();
  const RunReport back = RunReport::from_json(text, "mem");
  EXPECT_EQ(back.to_json(), text);
  EXPECT_EQ(back.verdict.kind, r.verdict.kind);
  EXPECT_EQ(back.config.model, "resnet20");
}

TEST(Report, DdpCommunicationAndRanksReachTheReport) {
  RunMeasurements m = recorded_measurements();
  m.comm = CommTimes{true, 2.0, 0.5, 1.5};
  RunReport r = build_report(recorded_config(), m);
  ASSERT_TRUE(r.allreduce_exposed_ms.has_value());
  EXPECT_DOUBLE_EQ(*r.allreduce_exposed_ms, 0.5);
  EXPECT_DOUBLE_EQ(*r.allreduce_overlapped_ms, 1.5);
  const StageReport& s = r.stages[static_cast<size_t>(Stage::allreduce)];
  ASSERT_TRUE(s.device_ms.has_value());
  EXPECT_DOUBLE_EQ(*s.device_ms, 2.0);
  EXPECT_EQ(s.device_source, "ddp");
  r.rank_step_ms = {20.0, 25.0};
  const std::string table = r.render_table();
  EXPECT_NE(
      table.find("ranks: step ms 20.00 (rank 0), 25.00 (rank 1); slowest rank 1, +25.0% over the fastest"),
      std::string::npos)
      << table;
  r.graphs = GraphReport{"auto", true, "", 3, 97, 4, 640, 4, ""};
  EXPECT_NE(r.render_table().find(
                "CUDA graphs: 97 steps replayed one graph of 640 nodes (captured at step 3), 4 eager"),
            std::string::npos)
      << r.render_table();
  EXPECT_NE(r.render_table().find("micro-batches: on 4 concurrent streams"), std::string::npos)
      << r.render_table();
  ASSERT_TRUE(r.stages[static_cast<size_t>(Stage::backward)].device_ms.has_value());
  EXPECT_NE(r.render_table().find("(4 streams, overlapping)"), std::string::npos) << r.render_table();
  const RunReport back = RunReport::from_json(r.to_json(), "mem");
  EXPECT_EQ(back.rank_step_ms, r.rank_step_ms);
  EXPECT_EQ(back.graphs.nodes, 640);
  EXPECT_EQ(back.graphs.streams, 4);
  EXPECT_EQ(back.graphs.captured_at_step, 3);
  EXPECT_EQ(back.to_json(), r.to_json());
  // A CPU (MPI) run knows only the host wait: no overlap figure, no device column.
  m.comm = CommTimes{false, 0.0, 3.0, 0.0};
  const RunReport cpu = build_report(recorded_config(), m);
  EXPECT_DOUBLE_EQ(*cpu.allreduce_exposed_ms, 3.0);
  EXPECT_FALSE(cpu.allreduce_overlapped_ms.has_value());
  EXPECT_NE(cpu.render_table().find("overlap not measured"), std::string::npos);
}

TEST(Report, JsonSchemaHasTheDocumentedFieldsAndTypes) {
  const json j = json::parse(build_report(recorded_config(), recorded_measurements()).to_json());
  EXPECT_EQ(j.at("schema"), "liftoff.report/1");
  for (const char* k : {"schema", "created_utc", "config", "steps", "stages", "device", "nvml", "memory",
                        "cpu", "loader", "verdict"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_TRUE(j.at("config").at("batch").is_number_integer());
  EXPECT_TRUE(j.at("config").at("pin_memory").is_boolean());
  EXPECT_TRUE(j.at("steps").at("images_per_s").is_number());
  EXPECT_TRUE(j.at("steps").at("step_ms").at("mean").is_number());
  ASSERT_EQ(j.at("stages").size(), static_cast<size_t>(kNumStages));
  for (int i = 0; i < kNumStages; ++i) {
    const json& s = j.at("stages").at(stage_name(static_cast<Stage>(i)));
    EXPECT_TRUE(s.at("host_ms").is_number());
    EXPECT_TRUE(s.at("host_share").is_number());
    EXPECT_TRUE(s.at("device_ms").is_number() || s.at("device_ms").is_null());
    EXPECT_TRUE(s.at("device_source").is_string());
  }
  EXPECT_TRUE(j.at("stages").at("optimizer").at("device_ms").is_null());  // not measured: null, not 0
  EXPECT_TRUE(j.at("device").at("busy_pct").is_number());
  EXPECT_TRUE(j.at("device").at("allreduce_exposed_ms").is_null());
  EXPECT_TRUE(j.at("nvml").at("util_mean_pct").is_number());
  EXPECT_TRUE(j.at("memory").at("host_peak_rss").is_number_integer());
  EXPECT_TRUE(j.at("cpu").at("threads").is_array());
  EXPECT_TRUE(j.at("loader").at("worker_busy_pct").is_array());
  for (const char* k : {"kind", "rule", "evidence", "suggestion"})
    EXPECT_TRUE(j.at("verdict").at(k).is_string()) << k;
  EXPECT_TRUE(j.at("cuda_graphs").at("used").is_boolean());
  EXPECT_TRUE(j.at("cuda_graphs").at("mode").is_string());
  EXPECT_TRUE(j.at("cuda_graphs").at("reason").is_string());
  EXPECT_TRUE(j.at("cuda_graphs").at("streams_reason").is_string());
  for (const char* k : {"captured_at_step", "graph_steps", "eager_steps", "nodes", "streams"})
    EXPECT_TRUE(j.at("cuda_graphs").at(k).is_number_integer()) << k;
}

TEST(Report, NvmlAbsentIsNullNotZero) {
  RunMeasurements m = recorded_measurements();
  m.gpu = GpuUtilization{};
  m.gpu->reason = "NVML not available";
  const json j = json::parse(build_report(recorded_config(), m).to_json());
  EXPECT_FALSE(j.at("nvml").at("available").get<bool>());
  EXPECT_TRUE(j.at("nvml").at("util_mean_pct").is_null());
  EXPECT_TRUE(j.at("nvml").at("power_mean_w").is_null());
  EXPECT_EQ(j.at("nvml").at("reason"), "NVML not available");
}

TEST(Report, FromJsonRejectsBadReports) {
  const std::string good = build_report(recorded_config(), recorded_measurements()).to_json();
  EXPECT_THROW(RunReport::from_json("{", "x.json"), IOError);
  json j = json::parse(good);
  j["schema"] = "liftoff.report/2";
  try {
    RunReport::from_json(j.dump(), "x.json");
    FAIL() << "accepted a newer schema";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("liftoff.report/2"), std::string::npos);
  }
  j = json::parse(good);
  j["stages"]["backward"].erase("host_ms");
  try {
    RunReport::from_json(j.dump(), "x.json");
    FAIL() << "accepted a report without stages.backward.host_ms";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("stages.backward.host_ms"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
  }
  j = json::parse(good);
  j["config"]["batch"] = "128";
  EXPECT_THROW(RunReport::from_json(j.dump(), "x.json"), IOError);
}

TEST(Report, TableShowsEveryStageAndTheVerdict) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  const std::string t = r.render_table();
  for (int i = 0; i < kNumStages; ++i)
    EXPECT_NE(t.find(stage_name(static_cast<Stage>(i))), std::string::npos);
  EXPECT_NE(t.find("6400.0 images/s"), std::string::npos) << t;
  EXPECT_NE(t.find("GPU busy 76%"), std::string::npos) << t;
  EXPECT_NE(t.find("verdict: host/launch-bound"), std::string::npos) << t;
  EXPECT_NE(t.find("try: --batch 256"), std::string::npos) << t;
  EXPECT_NE(t.find("(loader events)"), std::string::npos) << t;
}

// The graph status reaches the report before the verdict is judged (the verdict weighs the node count).
TEST(Report, GraphStatusIsInTheReportTheVerdictSees) {
  RunMeasurements m = recorded_measurements();
  GraphReport g;
  g.mode = "auto";
  g.used = true;
  g.nodes = 1307;
  m.graphs = g;
  const RunReport r = build_report(recorded_config(), m);
  EXPECT_TRUE(r.graphs.used);
  EXPECT_EQ(r.graphs.nodes, 1307);
  EXPECT_NE(r.verdict.evidence.find("already runs as a CUDA graph (1307 nodes)"), std::string::npos)
      << r.verdict.evidence;
}

TEST(Report, ComparisonTableAndHtml) {
  RunReport a = build_report(recorded_config(), recorded_measurements());
  RunMeasurements m = recorded_measurements();
  m.profile.totals.wall_ms = 100.0;
  for (double& h : m.profile.totals.host_ms) h /= 2.0;
  RunReport b = build_report(recorded_config(), m);
  const std::string t = render_comparison(a, b, "a.json", "b.json");
  EXPECT_NE(t.find("A: a.json"), std::string::npos);
  EXPECT_NE(t.find("2.00x"), std::string::npos) << t;  // every stage and the step twice as fast
  const std::string html = comparison_html(a, b, "a.json", "b<&>.json");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("b&lt;&amp;&gt;.json"), std::string::npos);
  EXPECT_EQ(html.find("b<&>.json"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no external assets
  EXPECT_NE(html.find("<title>forward:"), std::string::npos);
  // A run timed with CUDA events gets a second, device bar (with graphs its host bar is mostly data wait);
  // one without (a CPU run) keeps one bar.
  for (auto& stage : a.stages) stage.device_ms.reset();
  for (auto& stage : b.stages) stage.device_ms.reset();
  b.stages[static_cast<size_t>(Stage::forward)].device_ms = 2.6;
  b.stages[static_cast<size_t>(Stage::backward)].device_ms = 3.2;
  const std::string with_device = comparison_html(a, b, "cpu", "cuda");
  EXPECT_NE(with_device.find(">cuda (host)<"), std::string::npos) << with_device;
  EXPECT_NE(with_device.find(">cuda (device)<"), std::string::npos) << with_device;
  EXPECT_NE(with_device.find("5.80 ms on the device"), std::string::npos) << with_device;
  EXPECT_NE(with_device.find(">cpu<"), std::string::npos) << with_device;
  EXPECT_EQ(with_device.find(">cpu (device)<"), std::string::npos) << with_device;
}

// --- files -----------------------------------------------------------------------------------------------

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "liftoff_report_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Report, TraceIsValidChromeTraceJson) {
  ProfilerOptions o;
  o.warmup_steps = 0;
  o.keep_trace = true;
  Profiler p(o);
  std::thread worker([&] {
    platform::ThreadRegistration reg("loader-0");
    const auto t0 = std::chrono::steady_clock::now();
    p.record_thread_span("load batch", t0, t0 + std::chrono::microseconds(200));
  });
  worker.join();
  for (int i = 0; i < 4; ++i) {
    p.begin_step();
    { Profiler::StageScope s(&p, Stage::data_wait); }
    {
      Profiler::StageScope s(&p, Stage::forward);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    p.end_step(8);
  }
  GpuSamplerOptions so;
  so.cpu_interval_s = 0.01;
  GpuSampler sampler(Device::cpu(), so);
  platform::register_current_thread("main");
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sampler.stop();
  const std::string path = temp_path("trace.json");
  write_trace(path, p, &sampler, recorded_config());
  const json j = json::parse(read_all(path));
  ASSERT_TRUE(j.at("traceEvents").is_array());
  EXPECT_EQ(j.at("otherData").at("schema"), "liftoff.trace/1");
  int forward = 0, steps = 0, load = 0, counters = 0;
  bool main_named = false, worker_named = false, stream_named = false;
  for (const json& e : j.at("traceEvents")) {
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("ph").is_string());
    ASSERT_TRUE(e.at("pid").is_number_integer());
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ASSERT_TRUE(e.at("ts").is_number());
      ASSERT_TRUE(e.at("dur").is_number());
      ASSERT_TRUE(e.at("tid").is_number_integer());
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_GE(e.at("ts").get<double>(), 0.0);
      if (e.at("name") == "forward") {
        ++forward;
        EXPECT_GE(e.at("dur").get<double>(), 300.0);
        EXPECT_TRUE(e.at("args").at("step").is_number_integer());
      }
      if (e.at("name") == "step") ++steps;
      if (e.at("name") == "load batch") ++load;
    } else if (ph == "M") {
      if (e.at("name") == "thread_name") {
        const std::string n = e.at("args").at("name");
        main_named |= n == "main";
        worker_named |= n == "loader-0";
        stream_named |= n == "compute stream";
      }
    } else if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e.at("args").is_object());
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_EQ(forward, 4);
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(load, 1);
  EXPECT_TRUE(main_named);
  EXPECT_TRUE(worker_named);
  EXPECT_TRUE(stream_named);
  EXPECT_GE(counters, 1);  // thread CPU %
  std::remove(path.c_str());
  EXPECT_THROW(write_trace("/nonexistent-dir/t.json", p, nullptr, recorded_config()), IOError);
}

TEST(Report, MetricsLogWritesOneJsonObjectPerLine) {
  const std::string path = temp_path("metrics.jsonl");
  {
    MetricsLog log(path);
    MetricsRecord r;
    r.step = 10;
    r.loss = 1.25;
    r.lr = 0.1;
    r.images_per_second = 5000;
    log.write(r);
    r.step = 20;
    r.loss.reset();
    log.write(r);
  }
  std::ifstream in(path);
  std::string line;
  std::vector<json> lines;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("step"), 10);
  EXPECT_DOUBLE_EQ(lines[0].at("loss").get<double>(), 1.25);
  EXPECT_TRUE(lines[1].at("loss").is_null());
  EXPECT_TRUE(lines[1].at("gpu_util_pct").is_null());
  std::remove(path.c_str());
  EXPECT_THROW(MetricsLog("/nonexistent-dir/m.jsonl"), IOError);
}

// A real CPU run through RunMonitor: every figure comes from measurement.
TEST(Report, RunMonitorOnTheCpu) {
  RunConfig c;
  c.model = "synthetic";
  c.batch = 16;
  ProfilerOptions o;
  o.warmup_steps = 1;
  RunMonitor mon(c, Device::cpu(), o);
  mon.start();
  Profiler& p = mon.profiler();
  for (int i = 0; i < 6; ++i) {
    p.begin_step();
    {
      Profiler::StageScope s(&p, Stage::data_wait);  // a batch that is already there
    }
    {
      Profiler::StageScope s(&p, Stage::forward);
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(4);
      volatile double x = 0;
      while (std::chrono::steady_clock::now() < end) x = x + 1;
    }
    p.end_step(16);
  }
  EXPECT_NE(mon.progress_text().find("img/s"), std::string::npos);
  const RunReport r = mon.finish();
  EXPECT_EQ(r.config.device, "cpu");
  EXPECT_GT(r.config.host_cores, 0);
  EXPECT_EQ(r.steps_total, 6);
  EXPECT_EQ(r.steps_measured, 5);
  EXPECT_EQ(r.images_measured, 80);
  EXPECT_GT(r.images_per_second, 0.0);
  EXPECT_FALSE(r.device_timing);
  EXPECT_FALSE(r.device_busy_pct.has_value());
  EXPECT_FALSE(r.gpu.available);
  EXPECT_EQ(r.gpu.reason, "the device is the CPU");
  EXPECT_FALSE(r.device_memory_peak_allocated.has_value());
  ASSERT_TRUE(r.host_peak_rss.has_value());
  EXPECT_EQ(r.cpu_source, "run");
  ASSERT_TRUE(r.main_thread_cpu_pct.has_value());
  EXPECT_GT(*r.main_thread_cpu_pct, 0.0);
  EXPECT_EQ(r.verdict.kind, "compute-bound");  // the steps are 4 ms of forward and nearly nothing else
  EXPECT_THROW(mon.finish(), ValueError);
  // The report's JSON parses back.
  EXPECT_NO_THROW(RunReport::from_json(r.to_json()));
}

}  // namespace
}  // namespace liftoff

namespace liftoff {
namespace {
// Seen on the H200: CUDA-event spans of 97% but NVML utilization 10% (simple_cnn, batch 16): launch-bound.
TEST(Verdict, LowNvmlUtilizationOverridesEventSpans) {
  RunReport r;
  r.config.device = "cuda:0";
  r.config.batch = 16;
  r.steps_measured = 100;
  r.step_ms_mean = 0.79;
  r.stages[static_cast<size_t>(Stage::forward)].host_ms = 0.3;
  r.stages[static_cast<size_t>(Stage::backward)].host_ms = 0.4;
  r.stages[static_cast<size_t>(Stage::optimizer)].host_ms = 0.05;
  r.device_busy_pct = 97.0;
  r.gpu.available = true;
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 10.0;
  const Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "host/launch-bound") << v.evidence;
  EXPECT_NE(v.evidence.find("NVML utilization 10%"), std::string::npos) << v.evidence;
}
}  // namespace
}  // namespace liftoff
