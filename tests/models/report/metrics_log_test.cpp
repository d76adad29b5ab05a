// --log: per-window figures (MetricsWindow) and the JSON lines MetricsLog writes.
#include "models/report/metrics_log.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace liftoff {
namespace {

using json = nlohmann::json;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "liftoff_metrics_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(MetricsWindow, EachWindowHasItsOwnFigures) {
  MetricsWindow w(RunTotals{10, 0, 0.0});  // a resumed run: the window counts from step 10
  w.observe_epoch_loss(2.0, 4);            // 4 micro-batches, mean 2
  const MetricsRecord first = w.close(RunTotals{14, 128, 0.5});
  EXPECT_EQ(first.step, 14);
  EXPECT_EQ(first.steps, 4);
  EXPECT_EQ(first.images, 128);
  EXPECT_DOUBLE_EQ(first.window_s, 0.5);
  ASSERT_TRUE(first.loss && first.images_per_second && first.step_ms);
  EXPECT_DOUBLE_EQ(*first.loss, 2.0);
  EXPECT_DOUBLE_EQ(*first.images_per_second, 256.0);
  EXPECT_DOUBLE_EQ(*first.step_ms, 125.0);

  // The next window: slower, and not the running mean (which would be 1.5 over 8 micro-batches).
  w.observe_epoch_loss(1.5, 8);  // the epoch's sum went from 8 to 12: the window's 4 micro-batches sum 4
  const MetricsRecord second = w.close(RunTotals{18, 256, 1.5});
  EXPECT_EQ(second.steps, 4);
  EXPECT_EQ(second.images, 128);
  EXPECT_DOUBLE_EQ(*second.loss, 1.0);
  EXPECT_DOUBLE_EQ(*second.images_per_second, 128.0);
  EXPECT_DOUBLE_EQ(*second.step_ms, 250.0);
}

TEST(MetricsWindow, AWindowSpanningAnEpochEndAveragesItsOwnMicroBatches) {
  MetricsWindow w;
  w.observe_epoch_loss(2.0, 2);  // read at a record: the epoch's sum is 4
  w.close(RunTotals{2, 64, 1.0});
  w.observe_epoch_loss(3.0, 3);  // the epoch's end: one more micro-batch, loss 5
  w.start_epoch();               // the trainer's running mean starts again
  w.observe_epoch_loss(7.0, 1);  // the next epoch's first micro-batch
  const MetricsRecord r = w.close(RunTotals{4, 128, 2.0});
  ASSERT_TRUE(r.loss);
  EXPECT_DOUBLE_EQ(*r.loss, 6.0);  // (5 + 7) / 2
  EXPECT_EQ(r.steps, 2);
}

TEST(MetricsWindow, OnlyMeasuredFiguresAreFilled) {
  MetricsWindow w(RunTotals{5, 100, 3.0});
  EXPECT_TRUE(w.empty(RunTotals{5, 100, 3.5}));
  EXPECT_FALSE(w.empty(RunTotals{6, 132, 3.5}));
  w.observe_epoch_loss(1.0, 0);  // no micro-batch yet
  const MetricsRecord r = w.close(RunTotals{6, 132, 3.0});
  EXPECT_FALSE(r.loss.has_value());               // no loss was read in it
  EXPECT_FALSE(r.images_per_second.has_value());  // no time passed on this clock
  ASSERT_TRUE(r.step_ms.has_value());
  EXPECT_DOUBLE_EQ(*r.step_ms, 0.0);
}

// A decode loader's figures per window: the hybrid's share now and the workers' busy share.
TEST(MetricsLog, LoaderFiguresAreWrittenWhenMeasured) {
  const std::string path = temp_path("metrics_loader.jsonl");
  {
    MetricsLog log(path);
    MetricsRecord r;
    r.step = 5;
    r.hybrid_cpu_share = 0.9;
    r.loader_workers_busy_pct = 31.5;
    log.write(r);
  }
  const std::vector<json> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_DOUBLE_EQ(lines[0].at("hybrid_cpu_share").get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(lines[0].at("loader_workers_busy_pct").get<double>(), 31.5);
  std::remove(path.c_str());
}

TEST(MetricsLog, WritesTrainAndEvalRecordsOnePerLine) {
  const std::string path = temp_path("metrics.jsonl");
  {
    MetricsLog log(path);
    MetricsRecord r;
    r.step = 10;
    r.steps = 10;
    r.images = 320;
    r.window_s = 0.5;
    r.loss = 1.25;
    r.lr = 0.1;
    r.images_per_second = 640.0;
    r.step_ms = 50.0;
    log.write(r);
    EvalRecord e;
    e.step = 10;
    e.test_loss = 0.75;
    e.accuracy = 0.875;
    e.images = 64;
    log.write(e);
    r.step = 20;
    r.loss.reset();
    r.images_per_second.reset();
    log.write(r);
  }
  const std::vector<json> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].at("kind"), "train");
  EXPECT_EQ(lines[0].at("step"), 10);
  EXPECT_EQ(lines[0].at("steps"), 10);
  EXPECT_EQ(lines[0].at("images"), 320);
  EXPECT_DOUBLE_EQ(lines[0].at("loss").get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(lines[0].at("images_per_s").get<double>(), 640.0);
  EXPECT_DOUBLE_EQ(lines[0].at("step_ms").get<double>(), 50.0);
  EXPECT_TRUE(lines[0].at("gpu_util_pct").is_null());
  EXPECT_TRUE(lines[0].at("device_memory").is_null());
  EXPECT_TRUE(lines[0].at("host_rss").is_null());
  EXPECT_FALSE(lines[0].contains("hybrid_cpu_share"));  // not a hybrid decode run: absent, not null
  EXPECT_FALSE(lines[0].contains("loader_workers_busy_pct"));
  EXPECT_EQ(lines[1].at("kind"), "eval");
  EXPECT_DOUBLE_EQ(lines[1].at("test_loss").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(lines[1].at("accuracy").get<double>(), 0.875);
  EXPECT_EQ(lines[1].at("images"), 64);
  EXPECT_TRUE(lines[2].at("loss").is_null());
  EXPECT_TRUE(lines[2].at("images_per_s").is_null());
  std::remove(path.c_str());
  EXPECT_THROW(MetricsLog("/nonexistent-dir/m.jsonl"), IOError);
}

}  // namespace
}  // namespace liftoff
