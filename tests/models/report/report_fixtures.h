// Recorded reports and measurements shared by the report tests (numbers seen on real runs, or simple ones
// whose shares are easy to check by hand).
#pragma once
#include "data/loader.h"
#include "models/report/report.h"

namespace liftoff::report_testing {

inline StageReport& stage(RunReport& r, Stage s) {
  return r.stages[static_cast<size_t>(s)];
}

// A CUDA run of 20 ms steps with 2 ms of "other"; the caller moves time between stages.
inline RunReport cuda_report() {
  RunReport r;
  r.config.device = "cuda:0";
  r.config.batch = 128;
  r.config.accum = 1;
  r.config.amp = "off";
  r.config.augment = "gpu";
  r.config.workers = 4;
  r.config.prefetch = 8;
  r.config.pin_memory = true;
  r.config.host_cores = 16;
  r.steps_total = 105;
  r.steps_measured = 100;
  r.step_ms_mean = 20.0;
  r.images_per_second = 6400.0;
  stage(r, Stage::data_wait).host_ms = 0.5;
  stage(r, Stage::forward).host_ms = 5.0;
  stage(r, Stage::backward).host_ms = 10.0;
  stage(r, Stage::optimizer).host_ms = 2.5;
  stage(r, Stage::other).host_ms = 2.0;
  r.device_timing = true;
  r.device_steps = 100;
  r.device_busy_pct = 95.0;
  r.device_lag_ms = 15.0;
  r.gpu.available = true;
  r.gpu.samples = 50;
  r.gpu.util_mean_pct = 97.0;
  for (auto& s : r.stages) s.host_share = s.host_ms / r.step_ms_mean;
  return r;
}

inline RunMeasurements recorded_measurements() {
  RunMeasurements m;
  ProfileTotals& t = m.profile.totals;
  m.profile.steps_total = 12;
  m.profile.warmup_excluded = 2;
  m.profile.device_timing = true;
  m.profile.all_steps_wall_ms = 240.0;
  t.steps = 10;
  t.images = 1280;
  t.wall_ms = 200.0;
  t.wall_ms_min = 19.0;
  t.wall_ms_max = 21.0;
  t.wall_ms_sq = 10 * 400.0 + 2.0;
  t.host_ms[static_cast<size_t>(Stage::data_wait)] = 10.0;
  t.host_ms[static_cast<size_t>(Stage::forward)] = 60.0;
  t.host_ms[static_cast<size_t>(Stage::backward)] = 100.0;
  t.host_ms[static_cast<size_t>(Stage::optimizer)] = 20.0;
  t.host_ms[static_cast<size_t>(Stage::other)] = 10.0;
  t.device_steps = 8;
  t.device_wall_ms = 160.0;
  t.device_ms[static_cast<size_t>(Stage::forward)] = 40.0;
  t.device_marks[static_cast<size_t>(Stage::forward)] = 8;
  t.device_ms[static_cast<size_t>(Stage::backward)] = 80.0;
  t.device_marks[static_cast<size_t>(Stage::backward)] = 8;
  t.device_busy_ms = 120.0;
  t.device_lag_ms = 8.0;
  m.profile.throughput = ThroughputFigures{10, 1280, 0.2};  // the device kept up: its spans are the host's
  GpuUtilization g;
  g.available = true;
  g.samples = 30;
  g.util_mean_pct = 74.0;
  g.util_max_pct = 100.0;
  g.memory_total = uint64_t{80} << 30;
  g.memory_used_max = uint64_t{3} << 30;
  m.gpu = g;
  LoaderStats ls;
  ls.batches = 12;
  ls.images = 1536;
  ls.wait_seconds = 0.012;
  ls.worker_busy_seconds = {0.12, 0.06};
  ls.h2d_bytes = 12 * 1000000;
  ls.h2d_ms = 6.0;
  ls.h2d_timed = 12;
  ls.augment_ms = 2.4;
  ls.augment_timed = 12;
  m.loader = loader_report(ls, 0.240);
  m.device_memory_peak_allocated = int64_t{1} << 30;
  m.device_memory_peak_reserved = int64_t{3} << 29;
  m.host_peak_rss = int64_t{500} << 20;
  m.threads = {{"main", 1000, 0.2, 95.0}, {"loader-0", 1001, 0.1, 50.0}, {"loader-1", 1002, 0.05, 25.0}};
  m.cpu_source = "run";
  m.process_cpu_seconds = 0.4;
  return m;
}

inline RunConfig recorded_config() {
  RunConfig c;
  c.device = "cuda:0";
  c.model = "resnet20";
  c.data = "cifar10";
  c.batch = 128;
  c.workers = 2;
  c.pin_memory = true;
  c.augment = "gpu";
  c.host_cores = 8;
  return c;
}

}  // namespace liftoff::report_testing
