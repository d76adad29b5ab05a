// The report's activation layout and compute figures (model FLOPs/image, achieved TFLOP/s, MFU): in the JSON
// (and back), and in the table's header and compute line; MFU is null/n/a for a GPU without a known peak.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/report/report.h"

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

TEST(ReportCompute, JsonCarriesLayoutFlopsAndMfu) {
  const RunReport r = measured_report("NVIDIA H200");
  const nlohmann::json j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j.at("config").at("activation_layout"), "channels_last");
  const nlohmann::json& c = j.at("compute");
  EXPECT_DOUBLE_EQ(c.at("model_flops_per_image").get<double>(), 1e9);
  EXPECT_DOUBLE_EQ(c.at("achieved_tflops").get<double>(), 300.0);  // 3 x 1e9 x 1e5
  EXPECT_DOUBLE_EQ(c.at("peak_tflops").get<double>(), 989.0);
  EXPECT_NEAR(c.at("mfu").get<double>(), 300.0 / 989.0, 1e-12);
  EXPECT_EQ(c.at("precision"), "bf16");
  const RunReport back = RunReport::from_json(r.to_json(), "mem");
  EXPECT_EQ(back.config.activation_layout, "channels_last");
  EXPECT_DOUBLE_EQ(back.config.model_flops_per_image, 1e9);
  EXPECT_EQ(back.to_json(), r.to_json());
}

TEST(ReportCompute, UnknownGpuHasNoMfuAndOldReportsStillParse) {
  const nlohmann::json j = nlohmann::json::parse(measured_report("Some GPU").to_json());
  EXPECT_TRUE(j.at("compute").at("mfu").is_null());
  EXPECT_TRUE(j.at("compute").at("peak_tflops").is_null());
  nlohmann::json old = j;  // a report written before these fields
  old.erase("compute");
  old.at("config").erase("activation_layout");
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
