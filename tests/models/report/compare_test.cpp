// compare: per-image figures, one direction (B relative to A), the settings that differ; text and HTML.
#include "models/report/compare.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/report/build.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using report_testing::recorded_config;
using report_testing::recorded_measurements;

ComparisonRow find_row(const std::vector<ComparisonRow>& rows, const std::string& label) {
  for (const ComparisonRow& r : rows) {
    if (r[0] == label) return r;
  }
  ADD_FAILURE() << "no row " << label;
  return ComparisonRow{};
}

RunReport recorded_report() {
  return build_report(recorded_config(), recorded_measurements());
}

// The same run at half the batch: half the step time, half the images per step, the same images/s.
RunReport half_batch(const RunReport& a) {
  RunReport b = a;
  b.config.batch = a.config.batch / 2;
  b.images_measured = a.images_measured / 2;
  b.step_ms_mean = a.step_ms_mean / 2;
  for (StageReport& s : b.stages) {
    s.host_ms /= 2;
    if (s.device_ms) *s.device_ms /= 2;
  }
  return b;
}

TEST(Compare, RelativeSpeedSaysHowBDoesAgainstA) {
  EXPECT_EQ(relative_speed(2.0, 1.0), "2.00x faster");  // B takes half the time
  EXPECT_EQ(relative_speed(1.0, 1.5), "1.50x slower");
  EXPECT_EQ(relative_speed(1.0, 1.01), "equal");
  EXPECT_EQ(relative_speed(1.0, 1.03), "1.03x slower");
  EXPECT_EQ(relative_speed(0.0, 1.0), "-");
}

TEST(Compare, ImagesPerStepAreMeasuredThenFromTheConfig) {
  RunReport r = recorded_report();
  ASSERT_GT(r.steps_measured, 0);
  EXPECT_DOUBLE_EQ(images_per_step(r), static_cast<double>(r.images_measured) / r.steps_measured);
  r.config.world_size = 4;  // every rank processes its own images in the same step
  EXPECT_DOUBLE_EQ(images_per_step(r), 4.0 * r.images_measured / r.steps_measured);
  r.steps_measured = 0;
  r.config.accum = 2;
  EXPECT_DOUBLE_EQ(images_per_step(r), 4.0 * 128 * 2);
}

TEST(Compare, HalfTheBatchAtTheSameThroughputIsEqualNotFaster) {
  const RunReport a = recorded_report();
  const RunReport b = half_batch(a);
  ASSERT_DOUBLE_EQ(a.images_per_second, b.images_per_second);
  const std::vector<ComparisonRow> rows = comparison_rows(a, b);
  EXPECT_EQ(find_row(rows, "step")[3], "equal");
  EXPECT_EQ(find_row(rows, "images/s")[3], "equal");
  EXPECT_EQ(find_row(rows, "forward (host)")[3], "equal");
  EXPECT_EQ(find_row(rows, "forward (device)")[3], "equal");
  EXPECT_EQ(find_row(rows, "step")[1], find_row(rows, "step")[2]);  // the same ms per image
  EXPECT_EQ(find_row(rows, "images per step")[1], "128");
  EXPECT_EQ(find_row(rows, "images per step")[2], "64");
  const std::string text = render_comparison(a, b, "a.json", "b.json");
  EXPECT_EQ(text.find("faster"), text.find("\"faster\" means") + 1) << text;  // only the note says it
  EXPECT_EQ(text.find("faster", text.find("faster") + 1), std::string::npos) << text;
  EXPECT_EQ(text.find("slower"), std::string::npos) << text;
}

TEST(Compare, OneDirectionForTimesAndThroughput) {
  const RunReport a = recorded_report();
  RunReport b = a;  // B twice as fast: half the time per step at the same batch, twice the images/s
  b.step_ms_mean = a.step_ms_mean / 2;
  b.images_per_second = 2 * a.images_per_second;
  for (StageReport& s : b.stages) s.host_ms /= 2;
  const std::vector<ComparisonRow> rows = comparison_rows(a, b);
  EXPECT_EQ(find_row(rows, "step")[3], "2.00x faster");
  EXPECT_EQ(find_row(rows, "images/s")[3], "2.00x faster");
  EXPECT_EQ(find_row(rows, "data_wait (host)")[3], "2.00x faster");
  const std::vector<ComparisonRow> reversed = comparison_rows(b, a);
  EXPECT_EQ(find_row(reversed, "step")[3], "2.00x slower");
  EXPECT_EQ(find_row(reversed, "images/s")[3], "2.00x slower");
  EXPECT_EQ(rows.back(), (ComparisonRow{"verdict", a.verdict.kind, b.verdict.kind, ""}));
}

TEST(Compare, SettingsThatDifferAreListed) {
  const RunReport a = recorded_report();
  EXPECT_TRUE(differing_settings(a, a).empty());
  RunReport b = a;
  b.config.batch = 64;
  b.config.amp = "bf16";
  b.config.device = "cpu";
  b.config.model = "resnet56";
  const std::vector<ComparisonRow> differ = differing_settings(a, b);
  ASSERT_EQ(differ.size(), 4u);
  EXPECT_EQ(differ[0], (ComparisonRow{"device", "cuda:0", "cpu", ""}));
  EXPECT_EQ(differ[1], (ComparisonRow{"model", "resnet20", "resnet56", ""}));
  EXPECT_EQ(differ[2], (ComparisonRow{"batch", "128", "64", ""}));
  EXPECT_EQ(differ[3], (ComparisonRow{"amp", "off", "bf16", ""}));
  const std::string text = render_comparison(a, b, "a.json", "b.json");
  EXPECT_NE(text.find("settings that differ"), std::string::npos) << text;
  EXPECT_NE(text.find("resnet56"), std::string::npos) << text;
  EXPECT_NE(render_comparison(a, a, "a", "a").find("settings: the same"), std::string::npos);
}

TEST(Compare, TextStatesTheDirectionAndTheNormalisation) {
  const RunReport a = recorded_report();
  const RunReport b = half_batch(a);
  const std::string t = render_comparison(a, b, "a.json", "b.json");
  EXPECT_NE(t.find("A: a.json (cuda:0, resnet20, batch 128 x 1, amp off)"), std::string::npos) << t;
  EXPECT_NE(t.find("B relative to A throughout"), std::string::npos) << t;
  EXPECT_NE(t.find("(A 128, B 64)"), std::string::npos) << t;
  EXPECT_NE(t.find("B vs A"), std::string::npos) << t;
  EXPECT_EQ(t.find("A/B"), std::string::npos) << t;
}

TEST(Compare, HtmlShowsTheSameRowsSettingsAndAChartPerImage) {
  RunReport a = recorded_report();
  RunReport b = half_batch(a);
  b.config.amp = "bf16";
  const std::string html = comparison_html(a, b, "a.json", "b<&>.json");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("b&lt;&amp;&gt;.json"), std::string::npos);
  EXPECT_EQ(html.find("b<&>.json"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no external assets
  EXPECT_NE(html.find("<title>forward:"), std::string::npos);
  EXPECT_NE(html.find("<td>amp</td><td>off</td><td>bf16</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("B relative to A throughout"), std::string::npos);
  EXPECT_NE(html.find("<th>B vs A</th>"), std::string::npos);
  for (const ComparisonRow& row : comparison_rows(a, b)) {
    EXPECT_NE(html.find("<td>" + row[0] + "</td><td>" + row[1] + "</td>"), std::string::npos) << row[0];
  }
  // Both bars end at the same time per image (same throughput, different batch).
  const std::string total = "ms/image</text>";
  const size_t first = html.find(total), second = html.find(total, first + 1);
  ASSERT_NE(second, std::string::npos) << html;
  EXPECT_EQ(html.substr(html.rfind('>', first) + 1, first - html.rfind('>', first) - 1),
            html.substr(html.rfind('>', second) + 1, second - html.rfind('>', second) - 1));
}

TEST(Compare, HtmlAddsADeviceBarForRunsTimedWithEvents) {
  RunReport a = recorded_report();
  RunReport b = a;
  for (auto& stage : a.stages) stage.device_ms.reset();
  for (auto& stage : b.stages) stage.device_ms.reset();
  b.stages[static_cast<size_t>(Stage::forward)].device_ms = 2.6 * 128;
  b.stages[static_cast<size_t>(Stage::backward)].device_ms = 3.2 * 128;
  const std::string html = comparison_html(a, b, "cpu", "cuda");
  EXPECT_NE(html.find(">cuda (host)<"), std::string::npos) << html;
  EXPECT_NE(html.find(">cuda (device)<"), std::string::npos) << html;
  EXPECT_NE(html.find("5.8000 ms/image on the device"), std::string::npos) << html;
  EXPECT_NE(html.find(">cpu<"), std::string::npos) << html;
  EXPECT_EQ(html.find(">cpu (device)<"), std::string::npos) << html;
}

}  // namespace
}  // namespace liftoff
