// The device-side data wait (the compute stream waiting for a batch's GPU decode, timed by the decode
// loader's events) and the decode hybrid's CPU share: into the loader section and the data-wait stage,
// through the JSON, and seen by the verdict even while the host runs ahead of the device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/report/build.h"
#include "models/report/rules.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using json = nlohmann::json;
using report_testing::cuda_report;
using report_testing::recorded_config;
using report_testing::recorded_measurements;
using report_testing::stage;

RunMeasurements with_decode_loader(double device_wait_ms_total, int64_t timed) {
  RunMeasurements m = recorded_measurements();
  LoaderStats ls;
  ls.batches = 12;
  ls.images = 1536;
  ls.worker_busy_seconds = {0.01, 0.01};
  ls.device_wait_ms = device_wait_ms_total;
  ls.device_wait_timed = timed;
  ls.hybrid_cpu_share_mean = 0.75;
  ls.hybrid_cpu_share_final = 0.8;
  ls.worker_slot_wait_seconds = 0.048;  // 2 workers over 0.24 s: 10% each
  ls.ring_slots = 12;
  m.loader = loader_report(ls, 0.240);
  return m;
}

TEST(DeviceWait, FillsTheDataWaitStageAndTheLoaderSection) {
  // 12 batches over 12 steps, 36 ms of device wait over the 12 timed: 3 ms per batch and step.
  const RunReport r = build_report(recorded_config(), with_decode_loader(36.0, 12));
  ASSERT_TRUE(r.loader.device_wait_ms_per_batch.has_value());
  EXPECT_DOUBLE_EQ(*r.loader.device_wait_ms_per_batch, 3.0);
  const StageReport& wait = r.stages[static_cast<size_t>(Stage::data_wait)];
  ASSERT_TRUE(wait.device_ms.has_value());
  EXPECT_DOUBLE_EQ(*wait.device_ms, 3.0);
  EXPECT_EQ(wait.device_source, "loader");
  const json j = json::parse(r.to_json());
  EXPECT_DOUBLE_EQ(j.at("loader").at("device_wait_ms_per_batch").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j.at("loader").at("hybrid_cpu_share_mean").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j.at("loader").at("hybrid_cpu_share_final").get<double>(), 0.8);
  const RunReport back = RunReport::from_json(r.to_json(), "r.json");
  EXPECT_EQ(back.loader.hybrid_cpu_share_final, r.loader.hybrid_cpu_share_final);
  EXPECT_EQ(back.loader.device_wait_ms_per_batch, r.loader.device_wait_ms_per_batch);
  // The workers' wait for their slots, as a percent of the steps' wall time per worker, and the ring's size.
  ASSERT_TRUE(r.loader.worker_slot_wait_pct_mean.has_value());
  EXPECT_NEAR(*r.loader.worker_slot_wait_pct_mean, 10.0, 1e-9);
  EXPECT_NEAR(j.at("loader").at("worker_slot_wait_pct_mean").get<double>(), 10.0, 1e-9);
  EXPECT_EQ(j.at("loader").at("ring_slots").get<int64_t>(), 12);
  EXPECT_EQ(back.loader.worker_slot_wait_pct_mean, r.loader.worker_slot_wait_pct_mean);
  EXPECT_EQ(back.loader.ring_slots, 12);
}

TEST(DeviceWait, AbsentWithoutADecodeLoader) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  EXPECT_FALSE(r.loader.device_wait_ms_per_batch.has_value());
  EXPECT_FALSE(r.loader.hybrid_cpu_share_mean.has_value());
  const json j = json::parse(r.to_json());
  EXPECT_FALSE(j.at("loader").contains("device_wait_ms_per_batch"));
  EXPECT_FALSE(j.at("loader").contains("hybrid_cpu_share_mean"));
  EXPECT_FALSE(j.at("loader").contains("worker_slot_wait_pct_mean"));
  EXPECT_FALSE(j.at("loader").contains("ring_slots"));
  // A report written before the fields existed still reads.
  EXPECT_FALSE(RunReport::from_json(r.to_json(), "old.json").loader.hybrid_cpu_share_mean.has_value());
}

// GPU decode: the host hands batches out at once and runs ahead (the device 15 ms behind, busy in our
// marks), while the compute stream waits 6 of its 20 ms for the decode: input-bound, with --decode auto
// (the hybrid) as the advice; the same run without the device wait is compute-bound.
TEST(DeviceWait, TheVerdictSeesTheDeviceWaitingForGpuDecode) {
  RunReport r = cuda_report();
  r.config.decode = "gpu";
  r.config.jpeg = true;
  r.config.amp = "bf16";
  r.device_lag_ms = 40.0;  // behind: a host-side wait would be back-pressure
  r.loader.present = true;
  r.loader.worker_busy_pct_mean = 3.0;
  r.loader.worker_busy_pct = {3.0, 3.0, 3.0, 3.0};
  EXPECT_EQ(diagnose(r).kind, "compute-bound");
  StageReport& wait = stage(r, Stage::data_wait);
  wait.device_ms = 6.0;
  wait.device_share = 0.3;
  wait.device_source = "loader";
  const Verdict v = diagnose(r);
  EXPECT_EQ(v.kind, "input-bound") << v.evidence;
  EXPECT_NE(v.evidence.find("on the device"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("6.00 of 20.00 ms"), std::string::npos) << v.evidence;
  EXPECT_EQ(v.suggestion, "--decode auto");
}

// Recorded on the H200 (session 12): ResNet-50 bf16 batch 256 from a 3,000-JPEG folder, --decode auto (the
// hybrid, CPU share 0.10), CUDA graphs. The loader's h2d row held its decode streams' time, 141 ms per batch
// next to a 31.6 ms step, and the verdict read it as "copy-bound ... at 0.1 GB/s". It is nvJPEG's work on
// the same GPU, not a copy: the run is input-bound (the step waited 80% for data, GPU busy 77%) with GPU
// decoding named as the loader's largest stage; with --decode gpu the advice is the hybrid. A real copy
// stream of the same length (CPU decoding) still makes the run copy-bound.
RunReport recorded_hybrid_run(const std::string& decode) {
  RunReport r = cuda_report();
  r.config.decode = decode;
  r.config.jpeg = true;
  r.config.amp = "bf16";
  r.config.batch = 256;
  r.step_ms_mean = 31.613;
  r.images_per_second = 5205.5;
  r.device_busy_pct = 77.0;
  r.device_lag_ms = 67.78;
  r.gpu.samples = 24;
  r.gpu.util_mean_pct = 86.0;
  r.graphs.used = true;
  r.graphs.nodes = 603;
  const auto set = [&](Stage s, double host_ms, std::optional<double> device_ms, const char* source) {
    StageReport& st = stage(r, s);
    st.host_ms = host_ms;
    st.host_share = host_ms / r.step_ms_mean;
    st.device_ms = device_ms;
    if (device_ms) st.device_share = *device_ms / r.step_ms_mean;
    st.device_source = source;
  };
  set(Stage::data_wait, 25.218, 0.011, "loader");
  set(Stage::h2d, 0.0, 141.010, "loader");
  set(Stage::augment, 0.0, 0.320, "loader");
  set(Stage::forward, 0.0, 12.539, "");
  set(Stage::backward, 0.0, 25.005, "");
  set(Stage::optimizer, 0.0, 0.167, "");
  set(Stage::other, 6.394, std::nullopt, "");
  r.loader.present = true;
  r.loader.worker_busy_pct_mean = 11.0;
  r.loader.worker_busy_pct = {11.0, 11.0, 11.0, 11.0};
  r.loader.h2d_ms_per_batch = 141.010;
  r.loader.h2d_bytes_per_batch = 14 << 20;
  r.loader.h2d_gb_per_s = 0.1;
  return r;
}

TEST(DeviceWait, GpuDecodeStreamsAreNotCopies) {
  const Verdict hybrid = diagnose(recorded_hybrid_run("hybrid"));
  EXPECT_EQ(hybrid.kind, "input-bound") << hybrid.evidence;
  EXPECT_NE(hybrid.evidence.find("largest stage is GPU decoding (the decode streams), 141.01 ms per batch"),
            std::string::npos)
      << hybrid.evidence;
  EXPECT_EQ(hybrid.evidence.find("GB/s"), std::string::npos) << hybrid.evidence;
  EXPECT_EQ(hybrid.suggestion, "");
  const Verdict gpu = diagnose(recorded_hybrid_run("gpu"));
  EXPECT_EQ(gpu.kind, "input-bound") << gpu.evidence;
  EXPECT_EQ(gpu.suggestion, "--decode auto");
  const Verdict cpu = diagnose(recorded_hybrid_run("cpu"));
  EXPECT_EQ(cpu.kind, "copy-bound") << cpu.evidence;
}

}  // namespace
}  // namespace liftoff
