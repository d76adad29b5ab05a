// The report's activation layout and compute figures (model FLOPs/image, achieved TFLOP/s, MFU): in the JSON
// (and back), and in the table's header and compute line; MFU is null/n/a for a GPU without a known peak.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/report/report.h"
#include "runtime/profile/flops.h"

namespace liftoff {
namespace {

RunReport measured_report(const std::string& device_name) {
  RunReport r;
  r.config.device = "cuda:0";
  r.config.device_name = device_name;
  r.config.amp = "bf16";
  r.config.activation_layout = "channels_last";
  r.config.model_flops_per_image = 1e9;
  r.steps_measured = 10;
  r.images_measured = 1000000;
  r.wall_seconds = 10.0;
  r.images_per_second = 1e5;
  return r;
}

TEST(ReportCompute, JsonCarriesLayoutAndFlops) {
  const RunReport r = measured_report("NVIDIA H200");
  const nlohmann::json j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j.at("config").at("activation_layout"), "channels_last");
  EXPECT_DOUBLE_EQ(j.at("config").at("model_flops_per_image").get<double>(), 1e9);
  const RunReport back = RunReport::from_json(r.to_json(), "mem");
  EXPECT_EQ(back.config.activation_layout, "channels_last");
  EXPECT_DOUBLE_EQ(back.config.model_flops_per_image, 1e9);
  EXPECT_EQ(back.to_json(), r.to_json());
  // The derived figures come from what the JSON stores: 3 x 1e9 x 1e5 = 300 TFLOP/s of 989.
  const ComputeRate rate = compute_rate(back.config.model_flops_per_image, back.images_per_second,
                                        back.config.device_name, peak_precision(back.config.device, "bf16"));
  EXPECT_DOUBLE_EQ(rate.achieved_tflops, 300.0);
  ASSERT_TRUE(rate.mfu.has_value());
  EXPECT_NEAR(*rate.mfu, 300.0 / 989.0, 1e-12);
}

TEST(ReportCompute, UnknownGpuHasNoMfuAndOldReportsStillParse) {
  const RunReport unknown = measured_report("Some GPU");
  EXPECT_FALSE(compute_rate(1e9, 1e5, unknown.config.device_name, "bf16").mfu.has_value());
  EXPECT_NE(unknown.render_table().find("n/a"), std::string::npos) << unknown.render_table();
  nlohmann::json old = nlohmann::json::parse(unknown.to_json());  // a report written before these fields
  old.at("config").erase("activation_layout");
  old.at("config").erase("model_flops_per_image");
  const RunReport back = RunReport::from_json(old.dump(), "old.json");
  EXPECT_EQ(back.config.activation_layout, "");
  EXPECT_EQ(back.config.model_flops_per_image, 0.0);
}

TEST(ReportCompute, TableShowsLayoutAndCompute) {
  const std::string t = measured_report("NVIDIA H200").render_table();
  EXPECT_NE(t.find("activations channels_last"), std::string::npos) << t;
  EXPECT_NE(t.find("compute 1 GFLOP/image"), std::string::npos) << t;
  EXPECT_NE(t.find("300.0 TFLOP/s achieved"), std::string::npos) << t;
  EXPECT_NE(t.find("MFU 30.3% of 989"), std::string::npos) << t;
  RunReport none = measured_report("NVIDIA H200");
  none.config.model_flops_per_image = 0;  // not counted: no compute line
  EXPECT_EQ(none.render_table().find("compute "), std::string::npos);
}

}  // namespace
}  // namespace liftoff
