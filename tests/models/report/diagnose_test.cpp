// diagnose(): the whole table of verdict rules on recorded timings (each rule alone: rules_test.cpp).
#include "models/report/rules.h"

#include <gtest/gtest.h>

#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using report_testing::cuda_report;
using report_testing::stage;

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
  EXPECT_EQ(v.suggestion, "more CPU cores, or lighter decoding (smaller stored images)");
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
