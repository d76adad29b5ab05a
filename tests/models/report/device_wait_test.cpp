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
}

TEST(DeviceWait, AbsentWithoutADecodeLoader) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  EXPECT_FALSE(r.loader.device_wait_ms_per_batch.has_value());
  EXPECT_FALSE(r.loader.hybrid_cpu_share_mean.has_value());
  const json j = json::parse(r.to_json());
  EXPECT_FALSE(j.at("loader").contains("device_wait_ms_per_batch"));
  EXPECT_FALSE(j.at("loader").contains("hybrid_cpu_share_mean"));
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

}  // namespace
}  // namespace liftoff
