// Files left out by --on-bad-sample skip in the report (issue 27): the JSON list round-trips, reports without
// it still read, and the table and compare show the count.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/report/compare.h"
#include "models/report/run_report.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using report_testing::cuda_report;

RunReport report_with_skips() {
  RunReport r = cuda_report();
  r.loader.files_total = 104;
  r.loader.skipped_files = {{"f/train/0/trunc.png", "a PNG chunk ... (corrupt or truncated file)", "load"},
                            {"f/train/1/huge.png", "its header claims 100000x100000 pixels", "epoch 2"}};
  return r;
}

TEST(SkippedFilesReport, JsonHoldsTheListAndRoundTrips) {
  const RunReport r = report_with_skips();
  const nlohmann::json j = nlohmann::json::parse(r.to_json());
  ASSERT_TRUE(j.at("loader").at("skipped_files").is_array());
  EXPECT_EQ(j.at("loader").at("files_total"), 104);
  EXPECT_EQ(j.at("loader").at("skipped_files").at(1).at("path"), "f/train/1/huge.png");
  EXPECT_EQ(j.at("loader").at("skipped_files").at(1).at("found"), "epoch 2");
  const RunReport back = RunReport::from_json(r.to_json(), "r.json");
  ASSERT_EQ(back.loader.skipped_files.size(), 2u);
  EXPECT_EQ(back.loader.skipped_files[0].reason, r.loader.skipped_files[0].reason);
  EXPECT_EQ(back.loader.files_total, 104);
  EXPECT_EQ(back.to_json(), r.to_json());
}

TEST(SkippedFilesReport, AbsentOutsideImageFoldersAndReadWithout) {
  const RunReport plain = cuda_report();
  const nlohmann::json j = nlohmann::json::parse(plain.to_json());
  EXPECT_FALSE(j.at("loader").contains("skipped_files"));
  EXPECT_FALSE(j.at("loader").contains("files_total"));
  EXPECT_TRUE(RunReport::from_json(plain.to_json(), "old.json").loader.skipped_files.empty());
}

TEST(SkippedFilesReport, TableAndCompareShowTheCount) {
  const RunReport r = report_with_skips();
  const std::string table = r.render_table();
  EXPECT_NE(table.find("skipped: 2 of 104 files (--on-bad-sample skip; first: f/train/0/trunc.png"),
            std::string::npos)
      << table;
  EXPECT_EQ(cuda_report().render_table().find("skipped:"), std::string::npos);
  bool found = false;
  for (const ComparisonRow& row : comparison_rows(r, cuda_report())) {
    if (row[0] != "files skipped") continue;
    found = true;
    EXPECT_EQ(row[1], "2 of 104");
    EXPECT_EQ(row[2], "-");
  }
  EXPECT_TRUE(found);
  EXPECT_NE(render_comparison(r, r, "a.json", "b.json").find("files skipped"), std::string::npos);
}

}  // namespace
}  // namespace liftoff
