#include "models/report/build.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "data/loader.h"
#include "models/report/rules.h"

namespace liftoff {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_loader_thread(const std::string& name) {
  return name.rfind("loader", 0) == 0;
}

StageReport& stage(RunReport& r, Stage s) {
  return r.stages[static_cast<size_t>(s)];
}

// Mean device wall time of the steps whose marks were resolved; 0 when none were.
double device_wall_ms(const ProfileTotals& t) {
  const bool dev = t.device_steps > 0 && t.device_wall_ms > 0;
  return dev ? t.device_wall_ms / static_cast<double>(t.device_steps) : 0.0;
}

void step_figures(const ProfileSummary& p, RunReport& r) {
  const ProfileTotals& t = p.totals;
  r.steps_total = p.steps_total;
  r.steps_measured = t.steps;
  r.warmup_steps_excluded = p.warmup_excluded;
  r.images_measured = t.images;
  r.wall_seconds = t.wall_ms * 1e-3;
  if (t.steps > 0) {
    const double n = static_cast<double>(t.steps);
    r.step_ms_mean = t.wall_ms / n;
    r.step_ms_min = t.wall_ms_min;
    r.step_ms_max = t.wall_ms_max;
    r.step_ms_std = std::sqrt(std::max(0.0, t.wall_ms_sq / n - r.step_ms_mean * r.step_ms_mean));
  }
  r.throughput_seconds = p.throughput.seconds;
  r.images_per_second = p.throughput.images_per_second();
  r.device_timing = p.device_timing;
  r.device_steps = t.device_steps;
  r.device_steps_dropped = p.device_steps_dropped;
}

void stage_figures(const ProfileTotals& t, RunReport& r) {
  const double wall = r.step_ms_mean;
  const double dev_wall = device_wall_ms(t);
  for (int i = 0; i < kNumStages; ++i) {
    const auto k = static_cast<size_t>(i);
    StageReport& s = r.stages[k];
    if (t.steps > 0) s.host_ms = t.host_ms[k] / static_cast<double>(t.steps);
    s.host_share = wall > 0 ? s.host_ms / wall : 0.0;
    if (dev_wall > 0 && t.device_marks[k] > 0) {
      s.device_ms = t.device_ms[k] / static_cast<double>(t.device_steps);
      s.device_share = *s.device_ms / dev_wall;
      s.device_source = "events";
    }
  }
}

// The loader's own copy and augmentation events fill the device column of h2d / augment. Returns the
// augmentation kernel's device time per step (it runs on the compute stream outside the marks).
double loader_figures(const LoaderReport& loader, RunReport& r) {
  r.loader = loader;
  const double wall = r.step_ms_mean;
  const int64_t steps = loader.measured_steps_only ? r.steps_measured : r.steps_total;
  const double batches_per_step =
      steps > 0 ? static_cast<double>(loader.batches) / static_cast<double>(steps) : 0.0;
  auto fill = [&](Stage st, const std::optional<double>& per_batch) {
    StageReport& s = stage(r, st);
    if (!per_batch || s.device_ms || batches_per_step <= 0) return;
    s.device_ms = *per_batch * batches_per_step;
    s.device_share = wall > 0 ? *s.device_ms / wall : 0.0;
    s.device_source = "loader";
  };
  fill(Stage::h2d, loader.h2d_ms_per_batch);
  if (loader.h2d_issue_ms_per_batch && batches_per_step > 0) {
    // next() issues the copies inside the data-wait mark: that time moves to the host column of h2d, so
    // a copy from pageable memory (on the training thread) is not mistaken for the workers being late.
    StageReport& wait = stage(r, Stage::data_wait);
    StageReport& copy = stage(r, Stage::h2d);
    const double issue = std::min(*loader.h2d_issue_ms_per_batch * batches_per_step, wait.host_ms);
    wait.host_ms -= issue;
    copy.host_ms += issue;
    wait.host_share = wall > 0 ? wait.host_ms / wall : 0.0;
    copy.host_share = wall > 0 ? copy.host_ms / wall : 0.0;
  }
  fill(Stage::augment, loader.augment_ms_per_batch);
  fill(Stage::data_wait, loader.device_wait_ms_per_batch);  // the compute stream waiting for GPU decode
  if (loader.augment_ms_per_batch && batches_per_step > 0)
    return *loader.augment_ms_per_batch * batches_per_step;
  return 0.0;
}

void device_figures(const ProfileTotals& t, double loader_kernel_ms_per_step, RunReport& r) {
  double dev_wall = device_wall_ms(t);
  if (dev_wall <= 0) return;
  const auto steps = static_cast<double>(t.device_steps);
  // The loader's augmentation kernel runs on the compute stream outside the marks: add its time.
  const double busy_ms = t.device_busy_ms / steps + loader_kernel_ms_per_step;
  // Against the throughput's time per step where that is longer: the step marks leave out the device
  // waiting for a step to begin (a loader refilling its ring), which the run's one throughput counts
  // (runtime/profile/throughput.h). On the H200 a JPEG-folder run showed "GPU busy 99%" next to NVML's 92%
  // and a throughput 8% below its marks' step time.
  if (r.images_per_second > 0 && r.steps_measured > 0 && r.images_measured > 0) {
    const double images_per_step =
        static_cast<double>(r.images_measured) / static_cast<double>(r.steps_measured);
    dev_wall = std::max(dev_wall, 1e3 * images_per_step / r.images_per_second);
  }
  r.device_busy_pct = std::min(100.0, 100.0 * busy_ms / dev_wall);
  r.device_lag_ms = t.device_lag_ms / steps;
  const auto ar = static_cast<size_t>(Stage::allreduce);
  if (t.device_marks[ar] > 0) {
    const double total = t.device_ms[ar] / steps;
    const double overlapped = t.allreduce_overlapped_ms / steps;
    r.allreduce_overlapped_ms = overlapped;
    r.allreduce_exposed_ms = std::max(0.0, total - overlapped);
  }
}

// DDP measures its own buckets (events around each collective): that replaces profiler marks.
void comm_figures(const CommTimes& comm, RunReport& r) {
  r.allreduce_exposed_ms = comm.exposed_ms;
  if (!comm.device_timed) return;
  r.allreduce_overlapped_ms = comm.overlapped_ms;
  StageReport& s = stage(r, Stage::allreduce);
  s.device_ms = comm.comm_ms;
  s.device_share = r.step_ms_mean > 0 ? comm.comm_ms / r.step_ms_mean : 0.0;
  s.device_source = "ddp";
}

void host_figures(const RunMeasurements& m, RunReport& r) {
  r.device_memory_peak_allocated = m.device_memory_peak_allocated;
  r.device_memory_peak_reserved = m.device_memory_peak_reserved;
  r.device_memory_steady_peak_allocated = m.device_memory_steady_peak_allocated;
  r.device_memory_total = m.device_memory_total;
  if (!r.device_memory_total && r.gpu.memory_total > 0)
    r.device_memory_total = static_cast<int64_t>(r.gpu.memory_total);
  r.host_peak_rss = m.host_peak_rss;
  r.threads = m.threads;
  r.cpu_source = m.cpu_source;
  r.process_cpu_seconds = m.process_cpu_seconds;
  double worker_sum = 0.0;
  int workers = 0;
  for (const ThreadCpuReport& th : r.threads) {
    if (!th.busy_pct) continue;
    if (th.name == "main") r.main_thread_cpu_pct = th.busy_pct;
    if (is_loader_thread(th.name)) {
      worker_sum += *th.busy_pct;
      ++workers;
    }
  }
  if (workers > 0) r.workers_cpu_pct_mean = worker_sum / workers;
}

}  // namespace

LoaderReport loader_report(const LoaderStats& s, double steps_wall_s) {
  LoaderReport l;
  l.present = true;
  l.batches = s.batches;
  l.skipped_samples = s.skipped_samples;
  if (s.batches > 0) {
    l.wait_ms_per_batch = 1e3 * s.wait_seconds / static_cast<double>(s.batches);
    l.h2d_bytes_per_batch = s.h2d_bytes / s.batches;
  }
  double busy_total = 0.0;
  for (double b : s.worker_busy_seconds) {
    busy_total += b;
    if (steps_wall_s > 0) l.worker_busy_pct.push_back(100.0 * b / steps_wall_s);
  }
  if (steps_wall_s > 0 && !s.worker_busy_seconds.empty()) {
    l.worker_busy_pct_mean =
        100.0 * busy_total / steps_wall_s / static_cast<double>(s.worker_busy_seconds.size());
  }
  if (steps_wall_s > 0 && !s.worker_busy_seconds.empty() && s.worker_slot_wait_seconds > 0) {
    l.worker_slot_wait_pct_mean =
        100.0 * s.worker_slot_wait_seconds / steps_wall_s / static_cast<double>(s.worker_busy_seconds.size());
  }
  l.ring_slots = s.ring_slots;
  if (busy_total > 0) l.cpu_augment_share = s.cpu_augment_seconds / busy_total;
  if (s.h2d_timed > 0) {
    l.h2d_ms_per_batch = s.h2d_ms / static_cast<double>(s.h2d_timed);
    if (s.batches > 0 && *l.h2d_ms_per_batch > 0) {
      l.h2d_gb_per_s = static_cast<double>(l.h2d_bytes_per_batch) / (*l.h2d_ms_per_batch * 1e-3) / 1e9;
    }
  }
  if (s.batches > 0 && s.h2d_bytes > 0)
    l.h2d_issue_ms_per_batch = 1e3 * s.h2d_issue_seconds / static_cast<double>(s.batches);
  if (s.augment_timed > 0) l.augment_ms_per_batch = s.augment_ms / static_cast<double>(s.augment_timed);
  if (s.device_wait_timed > 0)
    l.device_wait_ms_per_batch = s.device_wait_ms / static_cast<double>(s.device_wait_timed);
  if (s.hybrid_cpu_share_final >= 0) {
    l.hybrid_cpu_share_final = s.hybrid_cpu_share_final;
    l.hybrid_cpu_share_mean = std::max(0.0, s.hybrid_cpu_share_mean);
  }
  return l;
}

RunReport build_report(const RunConfig& config, const RunMeasurements& m) {
  RunReport r;
  r.created_utc = utc_now();
  r.config = config;
  step_figures(m.profile, r);
  stage_figures(m.profile.totals, r);
  const double loader_kernel_ms_per_step = m.loader ? loader_figures(*m.loader, r) : 0.0;
  device_figures(m.profile.totals, loader_kernel_ms_per_step, r);
  if (m.comm) comm_figures(*m.comm, r);
  if (m.gpu) {
    r.gpu = *m.gpu;
  } else {
    r.gpu.reason = "not sampled";
  }
  host_figures(m, r);
  if (m.graphs) r.graphs = *m.graphs;
  r.verdict = diagnose(r);
  return r;
}

}  // namespace liftoff
