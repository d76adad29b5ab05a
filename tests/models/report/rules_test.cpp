// Each verdict rule alone, on the facts of a recorded report: when it fires, what it says, and when it stands
// aside (the whole table through diagnose(): diagnose_test.cpp).
#include "models/report/rules.h"

#include <gtest/gtest.h>

#include "runtime/error.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using report_testing::cuda_report;
using report_testing::stage;
std::optional<Verdict> apply(const char* rule, const RunReport& r, const VerdictThresholds& th = {}) {
  return verdict_rule(rule).apply(r, compute_facts(r, th), th);
}

// A CPU run: 17.5 of 20 ms/step in forward+backward+optimizer, 8 of 16 cores used.
RunReport cpu_report() {
  RunReport r = cuda_report();
  r.config.device = "cpu";
  r.config.threads = 8;
  r.device_timing = false;
  r.device_busy_pct.reset();
  r.device_lag_ms.reset();
  r.gpu = GpuUtilization{};
  return r;
}

// Recorded on the H200 (simple_cnn, batch 16, CUDA graphs): 4.45 ms behind, 60 nodes in a 0.27 ms step.
RunReport tiny_kernels_report() {
  RunReport r = cuda_report();
  r.config.batch = 16;
  r.step_ms_mean = 0.27;
  stage(r, Stage::data_wait).host_ms = 0.248;
  stage(r, Stage::forward).host_ms = 0.005;
  stage(r, Stage::backward).host_ms = 0.005;
  stage(r, Stage::optimizer).host_ms = 0.002;
  stage(r, Stage::other).host_ms = 0.01;
  r.device_busy_pct = 100.0;
  r.gpu.util_mean_pct = 1.0;
  r.gpu.samples = 1;
  r.device_lag_ms = 4.45;
  r.graphs.used = true;
  r.graphs.nodes = 60;
  return r;
}

TEST(VerdictRules, TableIsInPriorityOrderAndNamesAreLookedUp) {
  std::vector<std::string> names;
  for (const VerdictRule& rule : verdict_rules()) names.emplace_back(rule.name);
  const std::vector<std::string> expected = {
      "R0 no-steps",      "R0 too-short",  "R1 copy",       "R2 input",   "R3 communication",
      "R4 compute (cpu)", "R5 host (cpu)", "R6 unmeasured", "R4 compute", "R5 host"};
  EXPECT_EQ(names, expected);
  EXPECT_STREQ(verdict_rule("R2 input").name, "R2 input");
  try {
    verdict_rule("R9 magic");
    FAIL() << "found a rule that does not exist";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'R9 magic'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'R5 host'"), std::string::npos) << e.what();
  }
}

TEST(VerdictRules, R0NoSteps) {
  const std::optional<Verdict> v = apply("R0 no-steps", RunReport{});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "unknown");
  EXPECT_EQ(v->evidence, "no training step was measured");
  EXPECT_FALSE(apply("R0 no-steps", cuda_report()).has_value());
}

TEST(VerdictRules, R1Copy) {
  RunReport r = cuda_report();
  stage(r, Stage::h2d).device_ms = 8.0;  // 40% of the step on the copy stream
  r.device_busy_pct = 50.0;
  r.gpu.util_mean_pct = 50.0;
  r.loader.h2d_gb_per_s = 2.9;
  r.config.pin_memory = false;
  std::optional<Verdict> v = apply("R1 copy", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "copy-bound");
  EXPECT_EQ(v->suggestion, "--pin-memory");
  EXPECT_NE(v->evidence.find("8.00 ms/step (40% of the step 20.00 ms) at 2.9 GB/s"), std::string::npos)
      << v->evidence;
  // Pinned already, CPU augmentation: copy uint8 pixels instead.
  r.config.pin_memory = true;
  r.config.augment = "cpu";
  EXPECT_EQ(apply("R1 copy", r)->suggestion, "--augment gpu");
  // Under the threshold, or hidden behind a busy GPU, or outweighed by a larger exposed all-reduce: no.
  VerdictThresholds th;
  th.copy_share = 0.45;
  EXPECT_FALSE(apply("R1 copy", r, th).has_value());
  r.allreduce_exposed_ms = 10.0;  // 50% > 40%
  EXPECT_FALSE(apply("R1 copy", r).has_value());
  r.allreduce_exposed_ms.reset();
  r.device_busy_pct = 92.0;
  r.gpu.util_mean_pct = 92.0;
  EXPECT_FALSE(apply("R1 copy", r).has_value());
}

TEST(VerdictRules, R2Input) {
  RunReport r = cuda_report();
  stage(r, Stage::data_wait).host_ms = 12.2;  // 61%
  r.device_busy_pct = 35.0;
  r.loader.present = true;
  r.loader.worker_busy_pct = {98, 99, 97, 98};
  r.loader.worker_busy_pct_mean = 98.0;
  const std::optional<Verdict> v = apply("R2 input", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "input-bound");
  EXPECT_EQ(v->suggestion, "--workers 8");
  EXPECT_NE(
      v->evidence.find("waited 61% of its time for data (12.20 of 20.00 ms/step) while 4 workers were 98% "
                       "busy (loader busy time)"),
      std::string::npos)
      << v->evidence;
  // Recorded on the H200 (resnet20, batch 256, bf16, graphs): the same kind of wait behind a device running
  // 82 ms late through our stages is back-pressure, not a slow input.
  RunReport behind = cuda_report();
  behind.step_ms_mean = 4.605;
  stage(behind, Stage::data_wait).host_ms = 4.529;
  behind.device_busy_pct = 100.0;
  behind.gpu.util_mean_pct = 84.0;
  behind.device_lag_ms = 82.21;
  EXPECT_FALSE(apply("R2 input", behind).has_value());
}

TEST(VerdictRules, R3Communication) {
  RunReport r = cuda_report();
  r.config.world_size = 4;
  r.config.accum = 2;
  r.allreduce_exposed_ms = 6.0;
  r.allreduce_overlapped_ms = 3.0;
  r.device_busy_pct = 70.0;
  const std::optional<Verdict> v = apply("R3 communication", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "communication-bound");
  EXPECT_EQ(v->suggestion, "--accum 4");
  EXPECT_NE(v->evidence.find("6.00 ms/step exposed (30% of the step 20.00 ms); 3.00 ms/step overlapped"),
            std::string::npos)
      << v->evidence;
  r.allreduce_exposed_ms = 3.0;  // 15%
  EXPECT_FALSE(apply("R3 communication", r).has_value());
  // A CPU (MPI) run knows the host wait only.
  RunReport cpu = cpu_report();
  stage(cpu, Stage::allreduce).host_ms = 5.0;
  EXPECT_EQ(apply("R3 communication", cpu)->evidence.find("all-reduce left 5.00 ms/step exposed (25%"), 0u);
}

TEST(VerdictRules, R4ComputeCpu) {
  RunReport r = cpu_report();
  std::optional<Verdict> v = apply("R4 compute (cpu)", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "compute-bound");
  EXPECT_EQ(v->suggestion, "--threads 16");
  EXPECT_NE(v->evidence.find("took 88% of the step on the CPU (17.50 of 20.00 ms/step)"), std::string::npos)
      << v->evidence;
  r.config.cuda_available = true;
  EXPECT_EQ(apply("R4 compute (cpu)", r)->suggestion, "--device cuda");
  stage(r, Stage::forward).host_ms = 1.0;
  stage(r, Stage::backward).host_ms = 1.0;  // compute 4.5 of 20 ms
  EXPECT_FALSE(apply("R4 compute (cpu)", r).has_value());
  EXPECT_FALSE(apply("R4 compute (cpu)", cuda_report()).has_value());
}

TEST(VerdictRules, R5HostCpu) {
  RunReport r = cpu_report();
  stage(r, Stage::forward).host_ms = 1.0;
  stage(r, Stage::backward).host_ms = 1.0;
  stage(r, Stage::optimizer).host_ms = 1.0;
  stage(r, Stage::other).host_ms = 16.0;
  const std::optional<Verdict> v = apply("R5 host (cpu)", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "host/launch-bound");
  EXPECT_EQ(v->suggestion, "");
  EXPECT_NE(v->evidence.find("('other') took 80% of the step; forward+backward+optimizer 15%"),
            std::string::npos)
      << v->evidence;
  EXPECT_FALSE(apply("R5 host (cpu)", cuda_report()).has_value());
}

TEST(VerdictRules, R6Unmeasured) {
  RunReport r = cuda_report();
  r.device_busy_pct.reset();
  r.gpu = GpuUtilization{};
  r.gpu.reason = "NVML not available (libnvidia-ml.so.1 not found: no NVIDIA driver)";
  const std::optional<Verdict> v = apply("R6 unmeasured", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "unknown");
  EXPECT_NE(v->evidence.find("libnvidia-ml.so.1 not found"), std::string::npos) << v->evidence;
  EXPECT_NE(v->evidence.find("cannot tell compute-bound from host-bound"), std::string::npos) << v->evidence;
  EXPECT_FALSE(apply("R6 unmeasured", cuda_report()).has_value());  // events measured it
  EXPECT_FALSE(apply("R6 unmeasured", cpu_report()).has_value());   // not a GPU run
}

TEST(VerdictRules, R4Compute) {
  std::optional<Verdict> v = apply("R4 compute", cuda_report());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "compute-bound");
  EXPECT_EQ(v->suggestion, "--amp bf16");
  EXPECT_EQ(v->evidence.find("GPU busy 95% of the step (CUDA events), NVML utilization 97%"), 0u)
      << v->evidence;
  // Recorded on the H200 (resnet56, batch 1024, graphs): NVML 68% (4 samples, not used), 467 ms behind,
  // 1203 nodes in a 13 ms step: compute, and the data wait is back-pressure.
  RunReport far = cuda_report();
  far.config.amp = "bf16";
  far.step_ms_mean = 12.98;
  stage(far, Stage::data_wait).host_ms = 12.85;
  far.device_busy_pct = 100.0;
  far.gpu.util_mean_pct = 68.0;
  far.gpu.samples = 4;
  far.device_lag_ms = 466.92;
  far.graphs.used = true;
  far.graphs.nodes = 1203;
  v = apply("R4 compute", far);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->suggestion, "");
  EXPECT_NE(v->evidence.find("466.92 ms behind the host (the data wait is back-pressure"), std::string::npos)
      << v->evidence;
  // Kernels too small to fill the device, or a GPU idling while the host keeps up: not compute.
  EXPECT_FALSE(apply("R4 compute", tiny_kernels_report()).has_value());
  RunReport idle = cuda_report();
  idle.device_busy_pct = 34.0;
  idle.device_lag_ms = 0.12;
  EXPECT_FALSE(apply("R4 compute", idle).has_value());
}

TEST(VerdictRules, R5Host) {
  // The fallback of CUDA runs: the GPU idles while the host keeps up.
  RunReport r = cuda_report();
  r.config.batch = 64;
  r.device_busy_pct = 34.0;
  r.device_lag_ms = 0.12;
  r.gpu.util_mean_pct = 30.0;
  std::optional<Verdict> v = apply("R5 host", r);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, "host/launch-bound");
  EXPECT_EQ(v->suggestion, "--batch 128");
  EXPECT_NE(v->evidence.find("0.12 ms after the host issued it"), std::string::npos) << v->evidence;
  EXPECT_NE(v->evidence.find("the host spent 17.50 ms/step issuing"), std::string::npos) << v->evidence;
  // Tiny kernels (recorded, see tiny_kernels_report): the node floor is the evidence.
  v = apply("R5 host", tiny_kernels_report());
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->evidence.find("the graph's 60 nodes alone take about 0.15 ms at 2.5 us each: too little work"),
            std::string::npos)
      << v->evidence;
  EXPECT_EQ(v->suggestion, "--batch 32");
}

}  // namespace
}  // namespace liftoff
