// The utilization report: assembly from recorded measurements, the table, two runs compared, the trace file,
// the metrics log, and a real CPU run through RunMonitor. Verdict rules: rules_test.cpp; JSON: json_test.cpp.
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
#include "models/report/format.h"
#include "runtime/error.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using json = nlohmann::json;
using report_testing::recorded_config;
using report_testing::recorded_measurements;

// Under CUDA graphs the host queues steps faster than the device runs them: its step times (here 200 ms for
// 10 steps) are the queueing rate. The report's throughput is the device's (500 ms), and the table and the
// JSON show that one figure.
TEST(Report, ThroughputIsTheDevicesNotTheHostsQueueingRate) {
  RunMeasurements m = recorded_measurements();
  m.profile.throughput = ThroughputFigures{10, 1280, 0.5};
  const RunReport r = build_report(recorded_config(), m);
  EXPECT_DOUBLE_EQ(r.images_per_second, 2560.0);
  EXPECT_DOUBLE_EQ(r.wall_seconds, 0.2);  // the host's figure stays what it is, under its own name
  EXPECT_NE(r.render_table().find("throughput 2560.0 images/s"), std::string::npos) << r.render_table();
  const RunReport back = RunReport::from_json(r.to_json());
  EXPECT_DOUBLE_EQ(back.images_per_second, 2560.0);
  EXPECT_DOUBLE_EQ(back.throughput_seconds, 0.5);
}

// The device's step marks cover 20 ms a step (15 ms busy, plus the loader's 0.2 ms augmentation); when the
// run's throughput says a step took 25 ms (the device waited for steps to begin, e.g. a loader refilling
// after an epoch's end), GPU busy is taken against the 25 ms: one definition of the step's wall time.
TEST(Report, GpuBusyIsAgainstTheThroughputsStepTimeWhenLonger) {
  RunMeasurements m = recorded_measurements();
  const RunReport marks = build_report(recorded_config(), m);
  ASSERT_TRUE(marks.device_busy_pct.has_value());
  EXPECT_NEAR(*marks.device_busy_pct, 100.0 * 15.2 / 20.0, 1e-9);
  m.profile.throughput = ThroughputFigures{10, 1280, 0.25};
  const RunReport slower = build_report(recorded_config(), m);
  ASSERT_TRUE(slower.device_busy_pct.has_value());
  EXPECT_NEAR(*slower.device_busy_pct, 100.0 * 15.2 / 25.0, 1e-9);
}

TEST(Report, BuildFromMeasurements) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  EXPECT_EQ(r.steps_measured, 10);
  EXPECT_DOUBLE_EQ(r.step_ms_mean, 20.0);
  EXPECT_NEAR(r.step_ms_std, std::sqrt(0.2), 1e-9);
  EXPECT_DOUBLE_EQ(r.images_per_second, 6400.0);
  EXPECT_DOUBLE_EQ(r.throughput_seconds, 0.2);
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

// The start-up's algorithm searches: a line when there were any, kept by the JSON.
TEST(Report, StartupSearchesAreNamedWhenThereWereAny) {
  RunReport r = build_report(recorded_config(), recorded_measurements());
  EXPECT_EQ(r.render_table().find("start-up:"), std::string::npos) << r.render_table();
  r.algorithm_searches = 21;
  r.algorithm_search_seconds = 0.734;
  EXPECT_NE(r.render_table().find("start-up: 21 cuDNN algorithm searches took 0.73 s"), std::string::npos)
      << r.render_table();
  r.algorithms_restored = 42;
  r.algorithm_store = "/tmp/store.tsv";
  EXPECT_NE(r.render_table().find("; 42 cuDNN algorithm choices restored from an earlier run's store (no "
                                  "search); store /tmp/store.tsv (LIFTOFF_CONV_CACHE)"),
            std::string::npos)
      << r.render_table();
  const RunReport back = RunReport::from_json(r.to_json(), "mem");
  EXPECT_EQ(back.algorithm_searches, 21);
  EXPECT_DOUBLE_EQ(back.algorithm_search_seconds, 0.734);
  EXPECT_EQ(back.algorithms_restored, 42);
  EXPECT_EQ(back.algorithm_store, "/tmp/store.tsv");
  // Every choice restored: no search figure, the restored count alone.
  r.algorithm_searches = 0;
  EXPECT_NE(r.render_table().find("start-up: 42 cuDNN algorithm choices restored"), std::string::npos)
      << r.render_table();
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
  for (int i = 0; i < 12; ++i) {
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
  EXPECT_EQ(r.steps_total, 12);
  EXPECT_EQ(r.steps_measured, 11);
  EXPECT_EQ(r.images_measured, 176);
  EXPECT_GT(r.images_per_second, 0.0);
  // The progress line shows the report's figure: the same run, the same number.
  EXPECT_NE(mon.progress_text().find(report_format::fmt("%.0f", r.images_per_second) + " img/s"),
            std::string::npos)
      << mon.progress_text() << " vs " << r.images_per_second;
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

// The loader's figures cover the measured steps: workers that filled the ring during a long warm-up (5 s of
// busy time before the first measured step) and were busy throughout the measured steps are ~100% busy,
// not diluted (or, as here, inflated) by the start-up.
TEST(Report, RunMonitorReportsTheLoaderOverTheMeasuredSteps) {
  using Clock = std::chrono::steady_clock;
  RunConfig c;
  c.model = "synthetic";
  c.batch = 16;
  c.workers = 1;
  ProfilerOptions o;
  o.warmup_steps = 2;
  RunMonitor mon(c, Device::cpu(), o);
  Clock::time_point warm_end{};
  bool watched = false;
  // One worker busy all the time since the warm-up ended, after 5 s of start-up work.
  const auto loader_now = [&](int64_t batches) {
    LoaderStats s;
    s.batches = batches;
    s.images = 16 * batches;
    s.wait_seconds = 0.001 * static_cast<double>(batches);
    const double since = watched ? std::chrono::duration<double>(Clock::now() - warm_end).count() : 0.0;
    s.worker_busy_seconds = {5.0 + since};
    return s;
  };
  mon.watch_loader([&] {
    warm_end = Clock::now();
    const LoaderStats s = loader_now(2);
    watched = true;
    return s;
  });
  mon.start();
  Profiler& p = mon.profiler();
  for (int i = 0; i < 12; ++i) {
    p.begin_step();
    const auto end = Clock::now() + std::chrono::milliseconds(4);
    {
      Profiler::StageScope s(&p, Stage::forward);
      volatile double x = 0;
      while (Clock::now() < end) x = x + 1;
    }
    p.end_step(16);
  }
  ASSERT_TRUE(watched);
  const LoaderStats final_stats = loader_now(12);
  const RunReport r = mon.finish(&final_stats);
  EXPECT_EQ(r.steps_measured, 10);
  EXPECT_EQ(r.loader.batches, 10);  // the measured steps' batches
  ASSERT_TRUE(r.loader.worker_busy_pct_mean.has_value());
  EXPECT_NEAR(*r.loader.worker_busy_pct_mean, 100.0, 25.0);
  EXPECT_NEAR(r.loader.wait_ms_per_batch, 1.0, 1e-9);
}

}  // namespace
}  // namespace liftoff
