#include "models/report/report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "data/loader.h"
#include "runtime/error.h"

#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff {

using json = nlohmann::ordered_json;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pct(double fraction) {
  return fmt("%.0f%%", 100.0 * fraction);
}

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

}  // namespace

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt("%.2f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt("%.1f MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt("%.1f KiB", b / 1024.0);
  return std::to_string(bytes) + " B";
}

// ---------------------------------------------------------------------------------------------------------
// Verdict

Verdict diagnose(const RunReport& r, const VerdictThresholds& th) {
  Verdict v;
  const RunConfig& c = r.config;
  if (r.steps_measured == 0 || r.step_ms_mean <= 0.0) {
    v.kind = "unknown";
    v.rule = "R0 no-steps";
    v.evidence = "no training step was measured";
    return v;
  }
  const double wall = r.step_ms_mean;
  const auto& st = r.stages;
  auto host = [&](Stage s) { return st[static_cast<size_t>(s)].host_ms; };
  auto dev = [&](Stage s) { return st[static_cast<size_t>(s)].device_ms; };
  const bool cuda = c.device.rfind("cuda", 0) == 0;

  // The GPU's busy fraction: our own events first (they time only our work), NVML otherwise.
  std::optional<double> busy;
  std::string busy_text;
  if (r.device_busy_pct) {
    busy = *r.device_busy_pct / 100.0;
    busy_text = "GPU busy " + pct(*busy) + " of the step (CUDA events)";
    if (r.gpu.available && r.gpu.samples > 0 && r.gpu.samples < th.nvml_min_samples) {
      busy_text += ", NVML " + std::to_string(r.gpu.samples) + " sample(s) only, not used";
    } else if (r.gpu.available && r.gpu.samples > 0) {
      busy_text += ", NVML utilization " + fmt("%.0f%%", r.gpu.util_mean_pct);
      // Event spans include the gaps between kernels inside a stage (an upper bound); NVML counts time a
      // kernel was running. A launch-bound step shows spans near 100% but low NVML utilization: trust the
      // lower.
      if (r.gpu.util_mean_pct / 100.0 < *busy) {
        busy = r.gpu.util_mean_pct / 100.0;
        busy_text += " (the lower figure is used)";
      }
    }
  } else if (r.gpu.available && r.gpu.samples > 0) {
    busy = r.gpu.util_mean_pct / 100.0;
    busy_text = "GPU utilization " + fmt("%.0f%%", r.gpu.util_mean_pct) + " (NVML, " +
                std::to_string(r.gpu.samples) + " samples; no CUDA event timings)";
  } else if (cuda) {
    busy_text = "GPU busy not measured (no CUDA event timings; NVML: " +
                (r.gpu.reason.empty() ? std::string("not sampled") : r.gpu.reason) + ")";
  }

  const double wait_share = host(Stage::data_wait) / wall;
  // Plain doubles with has_ flags (not optionals): what was not measured is never compared or printed.
  // The copy's time: the copy stream's, or the training thread's when it is longer (issuing from pageable
  // memory, the thread itself copies through the driver's staging buffer).
  const double h2d_host_ms = host(Stage::h2d);
  const bool host_copy = cuda && h2d_host_ms > dev(Stage::h2d).value_or(0.0);
  const bool has_h2d = dev(Stage::h2d).has_value() || host_copy;
  const double h2d_ms = host_copy ? h2d_host_ms : dev(Stage::h2d).value_or(0.0);
  const double h2d_share = h2d_ms / wall;
  bool has_comm = r.allreduce_exposed_ms.has_value();
  double comm_ms = r.allreduce_exposed_ms.value_or(0.0);
  if (!has_comm && !cuda && host(Stage::allreduce) > 0) {  // CPU (MPI): host time
    has_comm = true;
    comm_ms = host(Stage::allreduce);
  }
  const double comm_share = comm_ms / wall;
  const std::string step_text = "step " + fmt("%.2f", wall) + " ms";

  // Workers: the loader's busy time when present, else the CPU time of threads named loader-*.
  std::optional<double> workers_busy;
  std::string workers_text;
  if (r.loader.present && r.loader.worker_busy_pct_mean) {
    workers_busy = *r.loader.worker_busy_pct_mean / 100.0;
    workers_text = std::to_string(r.loader.worker_busy_pct.size()) + " workers were " + pct(*workers_busy) +
                   " busy (loader busy time)";
  } else if (r.workers_cpu_pct_mean) {
    workers_busy = *r.workers_cpu_pct_mean / 100.0;
    workers_text = std::to_string(c.workers) + " workers used " + pct(*workers_busy) + " CPU each (mean)";
  } else {
    workers_text =
        c.workers > 0 ? "worker busy time not available" : "batches are made on the training thread";
  }

  // R1 copy-bound: H2D copies take a large share of the step and the GPU is not kept busy meanwhile.
  const bool r1 = has_h2d && h2d_share >= th.copy_share && (!busy || *busy < th.gpu_idle_for_copy);
  // The device finishing steps more than a step's time after the host issued them is behind the host: a
  // data wait then is back-pressure (the loader's buffers are still in the device's queue), not a slow input.
  // Behind with our marks covering the step: the device is working through our stages. With NVML finding the
  // SMs nearly idle meanwhile, its kernels are too small to fill it (a tiny model at a small batch,
  // graph-launched or not): latency, not compute; otherwise its compute holds the run back. Behind with our
  // marks covering little of the step: the device waits outside our work (inputs), not back-pressure.
  // Tiny kernels show as NVML finding the SMs idle (when it sampled enough), or as a captured graph whose
  // node count alone, at the least a node costs, takes half the step.
  const bool device_behind = cuda && r.device_lag_ms && *r.device_lag_ms > wall;
  const bool inside_marks = r.device_busy_pct && *r.device_busy_pct / 100.0 >= th.gpu_busy;
  const bool sms_idle =
      r.gpu.available && r.gpu.samples >= th.nvml_min_samples && r.gpu.util_mean_pct / 100.0 < th.sm_idle;
  // Concurrent micro-batches split the nodes over parallel paths: the floor is one path's.
  const double node_floor_ms = r.graphs.used
                                   ? static_cast<double>(r.graphs.nodes) * th.node_latency_us / 1000.0 /
                                         static_cast<double>(std::max<int64_t>(1, r.graphs.streams))
                                   : 0.0;
  const bool many_nodes = node_floor_ms >= th.latency_share * wall;
  const bool latency_bound = device_behind && inside_marks && (sms_idle || many_nodes);
  const bool back_pressure = device_behind && inside_marks && !latency_bound;
  // R2 input-bound: the training thread waits for data, and the device is not what holds it back.
  const bool r2 = wait_share >= th.input_share && !back_pressure && !latency_bound;
  // R3 communication-bound: all-reduce time not hidden behind backward.
  const bool r3 = has_comm && comm_share >= th.comm_share;
  // Among R1-R3, the largest share wins.
  double best = -1.0;
  int pick = 0;
  if (r1 && h2d_share > best) best = h2d_share, pick = 1;
  if (r2 && wait_share > best) best = wait_share, pick = 2;
  if (r3 && comm_share > best) best = comm_share, pick = 3;

  if (pick == 1) {
    v.kind = "copy-bound";
    v.rule = "R1 copy";
    v.evidence = "host-to-device copies took " + fmt("%.2f", h2d_ms) + " ms/step (" + pct(h2d_share) +
                 " of the " + step_text + ")";
    if (host_copy) {
      v.evidence += " on the training thread" +
                    std::string(c.pin_memory ? "" : " (from pageable memory, the thread does the copy)");
      if (r.loader.h2d_issue_ms_per_batch && *r.loader.h2d_issue_ms_per_batch > 0) {
        v.evidence += " at " +
                      fmt("%.1f", static_cast<double>(r.loader.h2d_bytes_per_batch) /
                                      (*r.loader.h2d_issue_ms_per_batch * 1e-3) / 1e9) +
                      " GB/s";
      }
    } else if (r.loader.h2d_gb_per_s) {
      v.evidence += " at " + fmt("%.1f", *r.loader.h2d_gb_per_s) + " GB/s";
    }
    v.evidence += "; " + (busy_text.empty() ? std::string("GPU busy not measured") : busy_text);
    if (!c.pin_memory) {
      v.suggestion = "--pin-memory";
    } else if (c.augment == "cpu") {
      v.suggestion = "--augment gpu";  // copy uint8 pixels instead of f32: 4x fewer bytes
    }
    return v;
  }
  if (pick == 2) {
    v.kind = "input-bound";
    v.rule = "R2 input";
    v.evidence = "the step waited " + pct(wait_share) + " of its time for data (" +
                 fmt("%.2f", host(Stage::data_wait)) + " of " + fmt("%.2f", wall) + " ms/step) while " +
                 workers_text;
    if (!busy_text.empty()) v.evidence += "; " + busy_text;
    const int cores = c.host_cores;
    if (c.workers <= 0) {
      const int w = std::max(2, std::min(8, cores > 1 ? cores - 1 : 2));
      v.suggestion = "--workers " + std::to_string(w);
    } else if (cuda && c.augment == "cpu" && r.loader.cpu_augment_share &&
               *r.loader.cpu_augment_share >= th.cpu_augment_share) {
      v.evidence += "; CPU augmentation is " + pct(*r.loader.cpu_augment_share) + " of the workers' time";
      v.suggestion = "--augment gpu";
    } else if (workers_busy && *workers_busy >= th.workers_busy) {
      const int limit = cores > 1 ? cores - 1 : c.workers;  // leave one core to the training thread
      const int w = std::min(2 * c.workers, limit);
      if (w > c.workers) {
        v.suggestion = "--workers " + std::to_string(w);
      } else if (cuda && c.augment == "cpu") {
        v.suggestion = "--augment gpu";
      } else {
        v.evidence += "; the workers already use every core (" + std::to_string(cores) + ")";
      }
    } else if (workers_busy) {
      // The workers have idle time yet the batch is late: a deeper ring absorbs their burstiness.
      const int depth = c.prefetch > 0 ? c.prefetch : 2 * c.workers;
      v.suggestion = "--prefetch " + std::to_string(2 * depth);
    } else {
      v.suggestion = "--workers " + std::to_string(2 * c.workers);
    }
    return v;
  }
  if (pick == 3) {
    v.kind = "communication-bound";
    v.rule = "R3 communication";
    v.evidence = "all-reduce left " + fmt("%.2f", comm_ms) + " ms/step exposed (" + pct(comm_share) +
                 " of the " + step_text + ")";
    if (r.allreduce_overlapped_ms)
      v.evidence += "; " + fmt("%.2f", *r.allreduce_overlapped_ms) + " ms/step overlapped backward";
    v.suggestion =
        "--accum " + std::to_string(2 * std::max<int64_t>(c.accum, 1));  // fewer all-reduces per image
    return v;
  }

  const std::string shares = "data wait " + pct(wait_share) +
                             (has_h2d ? ", H2D copies " + pct(h2d_share) : std::string()) + " of the " +
                             step_text;
  if (!cuda) {
    const double compute = host(Stage::forward) + host(Stage::backward) + host(Stage::optimizer);
    const double share = compute / wall;
    if (share >= th.cpu_compute_share) {
      v.kind = "compute-bound";
      v.rule = "R4 compute (cpu)";
      v.evidence = "forward+backward+optimizer took " + pct(share) + " of the step on the CPU (" +
                   fmt("%.2f", compute) + " of " + fmt("%.2f", wall) + " ms/step); " + shares;
      if (r.main_thread_cpu_pct) v.evidence += "; main thread CPU " + fmt("%.0f%%", *r.main_thread_cpu_pct);
      if (c.cuda_available) {
        v.suggestion = "--device cuda";
      } else if (c.threads > 0 && c.host_cores > c.threads) {
        v.suggestion = "--threads " + std::to_string(c.host_cores);
      }
    } else {
      v.kind = "host/launch-bound";
      v.rule = "R5 host (cpu)";
      v.evidence = "work outside the timed stages ('other') took " + pct(host(Stage::other) / wall) +
                   " of the step; forward+backward+optimizer " + pct(share) + "; " + shares;
    }
    return v;
  }
  if (!busy) {
    v.kind = "unknown";
    v.rule = "R6 unmeasured";
    v.evidence = busy_text + "; " + shares + ": cannot tell compute-bound from host-bound";
    return v;
  }
  if (!latency_bound && (*busy >= th.gpu_busy || back_pressure)) {
    v.kind = "compute-bound";
    v.rule = "R4 compute";
    v.evidence = busy_text + "; " + shares;
    if (r.device_lag_ms)
      v.evidence += "; the device ran " + fmt("%.2f", *r.device_lag_ms) + " ms behind the host";
    if (back_pressure && wait_share >= th.input_share)
      v.evidence += " (the data wait is back-pressure: the loader waits for the device to release buffers)";
    if (c.amp == "off" || c.amp.empty()) v.suggestion = "--amp bf16";
    return v;
  }
  v.kind = "host/launch-bound";
  v.rule = "R5 host";
  v.evidence = busy_text + " although " + shares;
  if (latency_bound) {
    v.evidence +=
        "; the device ran " + fmt("%.2f", *r.device_lag_ms) + " ms behind the host inside our stages";
    v.evidence += sms_idle ? ", yet NVML found its SMs mostly idle"
                           : ", and the graph's " + std::to_string(r.graphs.nodes) +
                                 " nodes alone take about " + fmt("%.2f", node_floor_ms) + " ms at " +
                                 fmt("%.1f", th.node_latency_us) + " us each";
    v.evidence += ": too little work per kernel";
    if (wait_share >= th.input_share) v.evidence += " (the data wait is back-pressure)";
  } else if (r.device_lag_ms) {
    v.evidence += "; the device finished each step " + fmt("%.2f", *r.device_lag_ms) +
                  " ms after the host issued it (it waits for the host)";
  }
  const double launch = host(Stage::forward) + host(Stage::backward) + host(Stage::optimizer);
  v.evidence += "; the host spent " + fmt("%.2f", launch) + " ms/step issuing forward+backward+optimizer";
  bool memory_room = true;
  if (r.device_memory_peak_reserved && r.device_memory_total && *r.device_memory_total > 0) {
    memory_room = 2.0 * static_cast<double>(*r.device_memory_peak_reserved) <
                  0.9 * static_cast<double>(*r.device_memory_total);
    v.evidence += "; device memory peak " + format_bytes(*r.device_memory_peak_reserved) + " of " +
                  format_bytes(*r.device_memory_total);
  }
  if (r.graphs.used) {
    v.evidence += "; the step already runs as a CUDA graph (" + std::to_string(r.graphs.nodes) + " nodes)";
  }
  if (c.batch > 0 && c.batch < th.small_batch && memory_room) {
    v.suggestion = "--batch " + std::to_string(2 * c.batch);
  } else if (!r.graphs.used && !latency_bound) {
    v.suggestion = "CUDA graphs";
  } else {
    v.suggestion = "more work per launch: a larger --batch";
  }
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// Assembly

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
  return l;
}

RunReport build_report(const RunConfig& config, const RunMeasurements& m) {
  RunReport r;
  r.created_utc = utc_now();
  r.config = config;
  const ProfileTotals& t = m.profile.totals;
  r.steps_total = m.profile.steps_total;
  r.steps_measured = t.steps;
  r.warmup_steps_excluded = m.profile.warmup_excluded;
  r.images_measured = t.images;
  r.wall_seconds = t.wall_ms * 1e-3;
  if (t.steps > 0) {
    const double n = static_cast<double>(t.steps);
    r.step_ms_mean = t.wall_ms / n;
    r.step_ms_min = t.wall_ms_min;
    r.step_ms_max = t.wall_ms_max;
    r.step_ms_std = std::sqrt(std::max(0.0, t.wall_ms_sq / n - r.step_ms_mean * r.step_ms_mean));
  }
  if (r.wall_seconds > 0) r.images_per_second = static_cast<double>(t.images) / r.wall_seconds;

  const double wall = r.step_ms_mean;
  r.device_timing = m.profile.device_timing;
  r.device_steps = t.device_steps;
  r.device_steps_dropped = m.profile.device_steps_dropped;
  const bool dev = t.device_steps > 0 && t.device_wall_ms > 0;
  const double dev_wall = dev ? t.device_wall_ms / static_cast<double>(t.device_steps) : 0.0;
  for (int i = 0; i < kNumStages; ++i) {
    StageReport& s = r.stages[static_cast<size_t>(i)];
    if (t.steps > 0) s.host_ms = t.host_ms[static_cast<size_t>(i)] / static_cast<double>(t.steps);
    s.host_share = wall > 0 ? s.host_ms / wall : 0.0;
    if (dev && t.device_marks[static_cast<size_t>(i)] > 0) {
      s.device_ms = t.device_ms[static_cast<size_t>(i)] / static_cast<double>(t.device_steps);
      s.device_share = *s.device_ms / dev_wall;
      s.device_source = "events";
    }
  }

  // The loader's own copy and augmentation events fill the device column of h2d / augment.
  double loader_kernel_ms_per_step = 0.0;
  if (m.loader) {
    r.loader = *m.loader;
    const double batches_per_step =
        r.steps_total > 0 ? static_cast<double>(r.loader.batches) / static_cast<double>(r.steps_total) : 0.0;
    auto fill = [&](Stage stage, const std::optional<double>& per_batch) {
      StageReport& s = r.stages[static_cast<size_t>(stage)];
      if (!per_batch || s.device_ms || batches_per_step <= 0) return;
      s.device_ms = *per_batch * batches_per_step;
      s.device_share = wall > 0 ? *s.device_ms / wall : 0.0;
      s.device_source = "loader";
    };
    fill(Stage::h2d, r.loader.h2d_ms_per_batch);
    if (r.loader.h2d_issue_ms_per_batch && batches_per_step > 0) {
      // next() issues the copies inside the data-wait mark: that time moves to the host column of h2d, so
      // a copy from pageable memory (on the training thread) is not mistaken for the workers being late.
      StageReport& wait = r.stages[static_cast<size_t>(Stage::data_wait)];
      StageReport& copy = r.stages[static_cast<size_t>(Stage::h2d)];
      const double issue = std::min(*r.loader.h2d_issue_ms_per_batch * batches_per_step, wait.host_ms);
      wait.host_ms -= issue;
      copy.host_ms += issue;
      wait.host_share = wall > 0 ? wait.host_ms / wall : 0.0;
      copy.host_share = wall > 0 ? copy.host_ms / wall : 0.0;
    }
    fill(Stage::augment, r.loader.augment_ms_per_batch);
    if (r.loader.augment_ms_per_batch && batches_per_step > 0) {
      loader_kernel_ms_per_step = *r.loader.augment_ms_per_batch * batches_per_step;
    }
  }
  if (dev) {
    // The loader's augmentation kernel runs on the compute stream outside the marks: add its time.
    const double busy_ms = t.device_busy_ms / static_cast<double>(t.device_steps) + loader_kernel_ms_per_step;
    r.device_busy_pct = std::min(100.0, 100.0 * busy_ms / dev_wall);
    r.device_lag_ms = t.device_lag_ms / static_cast<double>(t.device_steps);
    if (t.device_marks[static_cast<size_t>(Stage::allreduce)] > 0) {
      const double total =
          t.device_ms[static_cast<size_t>(Stage::allreduce)] / static_cast<double>(t.device_steps);
      const double overlapped = t.allreduce_overlapped_ms / static_cast<double>(t.device_steps);
      r.allreduce_overlapped_ms = overlapped;
      r.allreduce_exposed_ms = std::max(0.0, total - overlapped);
    }
  }
  if (m.comm) {
    // DDP measures its own buckets (events around each collective): that replaces profiler marks.
    r.allreduce_exposed_ms = m.comm->exposed_ms;
    if (m.comm->device_timed) {
      r.allreduce_overlapped_ms = m.comm->overlapped_ms;
      StageReport& s = r.stages[static_cast<size_t>(Stage::allreduce)];
      s.device_ms = m.comm->comm_ms;
      s.device_share = wall > 0 ? m.comm->comm_ms / wall : 0.0;
      s.device_source = "ddp";
    }
  }
  if (m.gpu) {
    r.gpu = *m.gpu;
  } else {
    r.gpu.reason = "not sampled";
  }
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
  if (m.graphs) r.graphs = *m.graphs;
  r.verdict = diagnose(r);
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// JSON

namespace {

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw IOError(source + ": not a valid " + kReportSchema + " report: " + what);
}

const json& need(const json& j, const char* key, const std::string& source, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) bad(source, "missing field '" + path + key + "'");
  return j.at(key);
}

double get_num(const json& j, const char* key, const std::string& src, const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (!v.is_number()) bad(src, "field '" + path + key + "' must be a number");
  return v.get<double>();
}

int64_t get_int(const json& j, const char* key, const std::string& src, const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (!v.is_number_integer()) bad(src, "field '" + path + key + "' must be an integer");
  return v.get<int64_t>();
}

bool get_bool(const json& j, const char* key, const std::string& src, const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (!v.is_boolean()) bad(src, "field '" + path + key + "' must be true or false");
  return v.get<bool>();
}

std::string get_str(const json& j, const char* key, const std::string& src, const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (!v.is_string()) bad(src, "field '" + path + key + "' must be a string");
  return v.get<std::string>();
}

std::optional<double> get_opt_num(const json& j, const char* key, const std::string& src,
                                  const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) bad(src, "field '" + path + key + "' must be a number or null");
  return v.get<double>();
}

std::optional<int64_t> get_opt_int(const json& j, const char* key, const std::string& src,
                                   const std::string& path = "") {
  const json& v = need(j, key, src, path);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number_integer()) bad(src, "field '" + path + key + "' must be an integer or null");
  return v.get<int64_t>();
}

}  // namespace

std::string RunReport::to_json() const {
  json j;
  j["schema"] = schema;
  j["created_utc"] = created_utc;
  const RunConfig& c = config;
  j["config"] = {{"tool", c.tool},
                 {"device", c.device},
                 {"device_name", c.device_name},
                 {"model", c.model},
                 {"data", c.data},
                 {"batch", c.batch},
                 {"accum", c.accum},
                 {"amp", c.amp},
                 {"augment", c.augment},
                 {"workers", c.workers},
                 {"prefetch", c.prefetch},
                 {"pin_memory", c.pin_memory},
                 {"threads", c.threads},
                 {"host_cores", c.host_cores},
                 {"world_size", c.world_size},
                 {"cuda_available", c.cuda_available},
                 {"activation_layout", c.activation_layout}};
  const ComputeRate rate = compute_rate(c.model_flops_per_image, images_per_second, c.device_name,
                                        peak_precision(c.device, c.amp));
  j["compute"] = {{"model_flops_per_image", c.model_flops_per_image},
                  {"achieved_tflops", rate.achieved_tflops},
                  {"peak_tflops", opt(rate.peak_tflops)},
                  {"mfu", opt(rate.mfu)},
                  {"precision", rate.precision}};
  j["steps"] = {
      {"total", steps_total},
      {"measured", steps_measured},
      {"warmup_excluded", warmup_steps_excluded},
      {"images", images_measured},
      {"wall_s", wall_seconds},
      {"step_ms", {{"mean", step_ms_mean}, {"min", step_ms_min}, {"max", step_ms_max}, {"std", step_ms_std}}},
      {"images_per_s", images_per_second}};
  json stages_json = json::object();
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& s = stages[static_cast<size_t>(i)];
    stages_json[stage_name(static_cast<Stage>(i))] = {{"host_ms", s.host_ms},
                                                      {"host_share", s.host_share},
                                                      {"device_ms", opt(s.device_ms)},
                                                      {"device_share", opt(s.device_share)},
                                                      {"device_source", s.device_source}};
  }
  j["stages"] = stages_json;
  j["device"] = {{"timing", device_timing},
                 {"timed_steps", device_steps},
                 {"dropped_steps", device_steps_dropped},
                 {"busy_pct", opt(device_busy_pct)},
                 {"lag_ms", opt(device_lag_ms)},
                 {"allreduce_exposed_ms", opt(allreduce_exposed_ms)},
                 {"allreduce_overlapped_ms", opt(allreduce_overlapped_ms)}};
  if (!rank_step_ms.empty()) j["ranks"] = {{"step_ms", rank_step_ms}};
  j["cuda_graphs"] = {{"mode", graphs.mode},
                      {"used", graphs.used},
                      {"reason", graphs.reason},
                      {"captured_at_step", graphs.captured_at_step},
                      {"graph_steps", graphs.graph_steps},
                      {"eager_steps", graphs.eager_steps},
                      {"nodes", graphs.nodes},
                      {"streams", graphs.streams},
                      {"streams_reason", graphs.streams_reason}};
  const bool g = gpu.available && gpu.samples > 0;
  auto gnum = [&](double v) { return g ? json(v) : json(nullptr); };
  j["nvml"] = {{"available", gpu.available},
               {"reason", gpu.reason},
               {"index", gpu.nvml_index},
               {"samples", gpu.samples},
               {"util_mean_pct", gnum(gpu.util_mean_pct)},
               {"util_max_pct", gnum(gpu.util_max_pct)},
               {"mem_util_mean_pct", gnum(gpu.mem_util_mean_pct)},
               {"memory_used_max", g ? json(gpu.memory_used_max) : json(nullptr)},
               {"memory_total", g ? json(gpu.memory_total) : json(nullptr)},
               {"sm_clock_mean_mhz", gnum(gpu.sm_clock_mean_mhz)},
               {"power_mean_w", gnum(gpu.power_mean_w)}};
  j["memory"] = {{"device_peak_allocated", opt(device_memory_peak_allocated)},
                 {"device_peak_reserved", opt(device_memory_peak_reserved)},
                 {"device_steady_peak_allocated", opt(device_memory_steady_peak_allocated)},
                 {"device_total", opt(device_memory_total)},
                 {"host_peak_rss", opt(host_peak_rss)}};
  json threads_json = json::array();
  for (const ThreadCpuReport& t : threads) {
    threads_json.push_back(
        {{"name", t.name}, {"tid", t.tid}, {"cpu_s", t.cpu_seconds}, {"busy_pct", opt(t.busy_pct)}});
  }
  j["cpu"] = {{"source", cpu_source},
              {"process_cpu_s", process_cpu_seconds},
              {"main_thread_pct", opt(main_thread_cpu_pct)},
              {"workers_pct_mean", opt(workers_cpu_pct_mean)},
              {"threads", threads_json}};
  const LoaderReport& l = loader;
  j["loader"] = {{"present", l.present},
                 {"batches", l.batches},
                 {"wait_ms_per_batch", l.wait_ms_per_batch},
                 {"worker_busy_pct", l.worker_busy_pct},
                 {"worker_busy_pct_mean", opt(l.worker_busy_pct_mean)},
                 {"cpu_augment_share", opt(l.cpu_augment_share)},
                 {"h2d_bytes_per_batch", l.h2d_bytes_per_batch},
                 {"h2d_ms_per_batch", opt(l.h2d_ms_per_batch)},
                 {"h2d_issue_ms_per_batch", opt(l.h2d_issue_ms_per_batch)},
                 {"h2d_gb_per_s", opt(l.h2d_gb_per_s)},
                 {"augment_ms_per_batch", opt(l.augment_ms_per_batch)},
                 {"skipped_samples", l.skipped_samples}};
  j["verdict"] = {{"kind", verdict.kind},
                  {"rule", verdict.rule},
                  {"evidence", verdict.evidence},
                  {"suggestion", verdict.suggestion}};
  return j.dump(2) + "\n";
}

RunReport RunReport::from_json(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw IOError(src + ": not valid JSON: " + e.what());
  }
  RunReport r;
  r.schema = get_str(j, "schema", src);
  if (r.schema != kReportSchema) {
    throw IOError(src + ": report schema '" + r.schema + "' is not supported (this build reads " +
                  kReportSchema + ")");
  }
  r.created_utc = get_str(j, "created_utc", src);
  const json& c = need(j, "config", src, "");
  const std::string cp = "config.";
  r.config.tool = get_str(c, "tool", src, cp);
  r.config.device = get_str(c, "device", src, cp);
  r.config.device_name = get_str(c, "device_name", src, cp);
  r.config.model = get_str(c, "model", src, cp);
  r.config.data = get_str(c, "data", src, cp);
  r.config.batch = get_int(c, "batch", src, cp);
  r.config.accum = get_int(c, "accum", src, cp);
  r.config.amp = get_str(c, "amp", src, cp);
  r.config.augment = get_str(c, "augment", src, cp);
  r.config.workers = static_cast<int>(get_int(c, "workers", src, cp));
  r.config.prefetch = static_cast<int>(get_int(c, "prefetch", src, cp));
  r.config.pin_memory = get_bool(c, "pin_memory", src, cp);
  r.config.threads = static_cast<int>(get_int(c, "threads", src, cp));
  r.config.host_cores = static_cast<int>(get_int(c, "host_cores", src, cp));
  r.config.world_size = static_cast<int>(get_int(c, "world_size", src, cp));
  r.config.cuda_available = get_bool(c, "cuda_available", src, cp);
  // Absent in reports written before them.
  if (c.contains("activation_layout")) r.config.activation_layout = get_str(c, "activation_layout", src, cp);
  if (j.contains("compute"))
    r.config.model_flops_per_image = get_num(j.at("compute"), "model_flops_per_image", src, "compute.");

  const json& s = need(j, "steps", src, "");
  r.steps_total = get_int(s, "total", src, "steps.");
  r.steps_measured = get_int(s, "measured", src, "steps.");
  r.warmup_steps_excluded = get_int(s, "warmup_excluded", src, "steps.");
  r.images_measured = get_int(s, "images", src, "steps.");
  r.wall_seconds = get_num(s, "wall_s", src, "steps.");
  const json& sm = need(s, "step_ms", src, "steps.");
  r.step_ms_mean = get_num(sm, "mean", src, "steps.step_ms.");
  r.step_ms_min = get_num(sm, "min", src, "steps.step_ms.");
  r.step_ms_max = get_num(sm, "max", src, "steps.step_ms.");
  r.step_ms_std = get_num(sm, "std", src, "steps.step_ms.");
  r.images_per_second = get_num(s, "images_per_s", src, "steps.");

  const json& st = need(j, "stages", src, "");
  for (int i = 0; i < kNumStages; ++i) {
    const char* name = stage_name(static_cast<Stage>(i));
    const std::string p = std::string("stages.") + name + ".";
    const json& e = need(st, name, src, "stages.");
    StageReport& sr = r.stages[static_cast<size_t>(i)];
    sr.host_ms = get_num(e, "host_ms", src, p);
    sr.host_share = get_num(e, "host_share", src, p);
    sr.device_ms = get_opt_num(e, "device_ms", src, p);
    sr.device_share = get_opt_num(e, "device_share", src, p);
    sr.device_source = get_str(e, "device_source", src, p);
  }
  const json& d = need(j, "device", src, "");
  r.device_timing = get_bool(d, "timing", src, "device.");
  r.device_steps = get_int(d, "timed_steps", src, "device.");
  r.device_steps_dropped = get_int(d, "dropped_steps", src, "device.");
  r.device_busy_pct = get_opt_num(d, "busy_pct", src, "device.");
  r.device_lag_ms = get_opt_num(d, "lag_ms", src, "device.");
  r.allreduce_exposed_ms = get_opt_num(d, "allreduce_exposed_ms", src, "device.");
  r.allreduce_overlapped_ms = get_opt_num(d, "allreduce_overlapped_ms", src, "device.");
  if (j.contains("ranks")) {  // DDP runs only
    const json& ranks = j.at("ranks");
    if (!ranks.is_object() || !ranks.contains("step_ms") || !ranks.at("step_ms").is_array())
      bad(src, "field 'ranks.step_ms' must be an array of numbers");
    for (const json& v : ranks.at("step_ms")) {
      if (!v.is_number()) bad(src, "field 'ranks.step_ms' must be an array of numbers");
      r.rank_step_ms.push_back(v.get<double>());
    }
  }
  if (j.contains("cuda_graphs")) {  // absent in reports written before graphs existed
    const json& g = j.at("cuda_graphs");
    r.graphs.mode = get_str(g, "mode", src, "cuda_graphs.");
    r.graphs.used = get_bool(g, "used", src, "cuda_graphs.");
    r.graphs.reason = get_str(g, "reason", src, "cuda_graphs.");
    r.graphs.captured_at_step = get_int(g, "captured_at_step", src, "cuda_graphs.");
    r.graphs.graph_steps = get_int(g, "graph_steps", src, "cuda_graphs.");
    r.graphs.eager_steps = get_int(g, "eager_steps", src, "cuda_graphs.");
    r.graphs.nodes = get_int(g, "nodes", src, "cuda_graphs.");
    if (g.contains("streams")) {  // absent before concurrent micro-batches
      r.graphs.streams = get_int(g, "streams", src, "cuda_graphs.");
      r.graphs.streams_reason = get_str(g, "streams_reason", src, "cuda_graphs.");
    }
  }

  const json& n = need(j, "nvml", src, "");
  r.gpu.available = get_bool(n, "available", src, "nvml.");
  r.gpu.reason = get_str(n, "reason", src, "nvml.");
  r.gpu.nvml_index = static_cast<int>(get_int(n, "index", src, "nvml."));
  r.gpu.samples = get_int(n, "samples", src, "nvml.");
  r.gpu.util_mean_pct = get_opt_num(n, "util_mean_pct", src, "nvml.").value_or(0.0);
  r.gpu.util_max_pct = get_opt_num(n, "util_max_pct", src, "nvml.").value_or(0.0);
  r.gpu.mem_util_mean_pct = get_opt_num(n, "mem_util_mean_pct", src, "nvml.").value_or(0.0);
  r.gpu.memory_used_max = static_cast<uint64_t>(get_opt_int(n, "memory_used_max", src, "nvml.").value_or(0));
  r.gpu.memory_total = static_cast<uint64_t>(get_opt_int(n, "memory_total", src, "nvml.").value_or(0));
  r.gpu.sm_clock_mean_mhz = get_opt_num(n, "sm_clock_mean_mhz", src, "nvml.").value_or(0.0);
  r.gpu.power_mean_w = get_opt_num(n, "power_mean_w", src, "nvml.").value_or(0.0);

  const json& mem = need(j, "memory", src, "");
  r.device_memory_peak_allocated = get_opt_int(mem, "device_peak_allocated", src, "memory.");
  r.device_memory_peak_reserved = get_opt_int(mem, "device_peak_reserved", src, "memory.");
  if (mem.contains("device_steady_peak_allocated"))  // absent in reports written before it existed
    r.device_memory_steady_peak_allocated = get_opt_int(mem, "device_steady_peak_allocated", src, "memory.");
  r.device_memory_total = get_opt_int(mem, "device_total", src, "memory.");
  r.host_peak_rss = get_opt_int(mem, "host_peak_rss", src, "memory.");

  const json& cpu = need(j, "cpu", src, "");
  r.cpu_source = get_str(cpu, "source", src, "cpu.");
  r.process_cpu_seconds = get_num(cpu, "process_cpu_s", src, "cpu.");
  r.main_thread_cpu_pct = get_opt_num(cpu, "main_thread_pct", src, "cpu.");
  r.workers_cpu_pct_mean = get_opt_num(cpu, "workers_pct_mean", src, "cpu.");
  const json& th = need(cpu, "threads", src, "cpu.");
  if (!th.is_array()) bad(src, "field 'cpu.threads' must be an array");
  for (const json& t : th) {
    ThreadCpuReport tr;
    tr.name = get_str(t, "name", src, "cpu.threads[].");
    tr.tid = get_int(t, "tid", src, "cpu.threads[].");
    tr.cpu_seconds = get_num(t, "cpu_s", src, "cpu.threads[].");
    tr.busy_pct = get_opt_num(t, "busy_pct", src, "cpu.threads[].");
    r.threads.push_back(std::move(tr));
  }
  const json& l = need(j, "loader", src, "");
  const std::string lp = "loader.";
  r.loader.present = get_bool(l, "present", src, lp);
  r.loader.batches = get_int(l, "batches", src, lp);
  r.loader.wait_ms_per_batch = get_num(l, "wait_ms_per_batch", src, lp);
  const json& wb = need(l, "worker_busy_pct", src, lp);
  if (!wb.is_array()) bad(src, "field 'loader.worker_busy_pct' must be an array");
  for (const json& w : wb) {
    if (!w.is_number()) bad(src, "field 'loader.worker_busy_pct' must hold numbers");
    r.loader.worker_busy_pct.push_back(w.get<double>());
  }
  r.loader.worker_busy_pct_mean = get_opt_num(l, "worker_busy_pct_mean", src, lp);
  r.loader.cpu_augment_share = get_opt_num(l, "cpu_augment_share", src, lp);
  r.loader.h2d_bytes_per_batch = get_int(l, "h2d_bytes_per_batch", src, lp);
  r.loader.h2d_ms_per_batch = get_opt_num(l, "h2d_ms_per_batch", src, lp);
  if (l.contains("h2d_issue_ms_per_batch"))  // absent in reports written before it existed
    r.loader.h2d_issue_ms_per_batch = get_opt_num(l, "h2d_issue_ms_per_batch", src, lp);
  r.loader.h2d_gb_per_s = get_opt_num(l, "h2d_gb_per_s", src, lp);
  r.loader.augment_ms_per_batch = get_opt_num(l, "augment_ms_per_batch", src, lp);
  r.loader.skipped_samples = get_int(l, "skipped_samples", src, lp);

  const json& v = need(j, "verdict", src, "");
  r.verdict.kind = get_str(v, "kind", src, "verdict.");
  r.verdict.rule = get_str(v, "rule", src, "verdict.");
  r.verdict.evidence = get_str(v, "evidence", src, "verdict.");
  r.verdict.suggestion = get_str(v, "suggestion", src, "verdict.");
  return r;
}

void RunReport::write_json(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IOError("cannot write the report to '" + path + "'");
  out << to_json();
  out.flush();
  if (!out) throw IOError("writing the report to '" + path + "' failed");
}

// ---------------------------------------------------------------------------------------------------------
// Table

std::string RunReport::render_table() const {
  std::ostringstream o;
  const RunConfig& c = config;
  o << "Utilization report: " << steps_measured << " steps measured";
  if (warmup_steps_excluded > 0) o << " (after " << warmup_steps_excluded << " warm-up)";
  o << ", " << c.device << ", batch " << c.batch << " x accum " << c.accum;
  if (!c.activation_layout.empty()) o << ", activations " << c.activation_layout;
  o << "\n";
  if (steps_measured == 0) {
    o << "  no training step was measured\n";
    return o.str();
  }
  char line[160];
  std::snprintf(line, sizeof line, "  %-11s %12s %7s %14s %7s\n", "stage", "host ms/step", "share",
                "device ms/step", "share");
  o << line;
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& s = stages[static_cast<size_t>(i)];
    const std::string dev = s.device_ms ? fmt("%.3f", *s.device_ms) : "-";
    const std::string dev_share = s.device_share ? fmt("%.1f%%", 100.0 * *s.device_share) : "";
    // Micro-batches on concurrent streams: their forward/backward intervals overlap, so the shares add up
    // to more than the step.
    const bool overlapping =
        graphs.streams > 1 && s.device_ms &&
        (static_cast<Stage>(i) == Stage::forward || static_cast<Stage>(i) == Stage::backward);
    const std::string note = s.device_source == "loader" ? "  (loader events)"
                             : overlapping ? "  (" + std::to_string(graphs.streams) + " streams, overlapping)"
                                           : "";
    std::snprintf(line, sizeof line, "  %-11s %12.3f %6.1f%% %14s %7s%s\n", stage_name(static_cast<Stage>(i)),
                  s.host_ms, 100.0 * s.host_share, dev.c_str(), dev_share.c_str(), note.c_str());
    o << line;
  }
  std::snprintf(line, sizeof line, "  %-11s %12.3f %6.1f%%   (min %.3f, max %.3f, std %.3f)\n", "step",
                step_ms_mean, 100.0, step_ms_min, step_ms_max, step_ms_std);
  o << line;
  o << "  throughput " << fmt("%.1f", images_per_second) << " images/s";
  if (device_busy_pct) o << " | GPU busy " << fmt("%.0f%%", *device_busy_pct) << " (CUDA events)";
  if (device_lag_ms) o << " | device lag " << fmt("%.2f", *device_lag_ms) << " ms";
  o << "\n";
  if (c.model_flops_per_image > 0) {
    o << "  compute "
      << compute_rate_text(compute_rate(c.model_flops_per_image, images_per_second, c.device_name,
                                        peak_precision(c.device, c.amp)))
      << "\n";
  }
  if (allreduce_exposed_ms) {
    o << "  all-reduce " << fmt("%.3f", *allreduce_exposed_ms) << " ms/step exposed, "
      << (allreduce_overlapped_ms ? fmt("%.3f", *allreduce_overlapped_ms) + " ms/step overlapped\n"
                                  : std::string("overlap not measured (CPU: host wait only)\n"));
  }
  if (graphs.used) {
    o << "  CUDA graphs: " << graphs.graph_steps << " steps replayed one graph of " << graphs.nodes
      << " nodes (captured at step " << graphs.captured_at_step << "), " << graphs.eager_steps << " eager"
      << (graphs.reason.empty() ? std::string() : "; then stopped: " + graphs.reason) << "\n";
    if (graphs.streams > 1) {
      o << "  micro-batches: on " << graphs.streams
        << " concurrent streams (their forward/backward device times overlap)\n";
    } else if (!graphs.streams_reason.empty() && config.accum > 1) {
      o << "  micro-batches: one stream (" << graphs.streams_reason << ")\n";
    }
  } else if (config.device.rfind("cuda", 0) == 0) {
    o << "  CUDA graphs: not used ("
      << (!graphs.reason.empty() ? graphs.reason
          : graphs.mode == "off" ? std::string("--cuda-graphs off")
                                 : std::string("no step was captured"))
      << ")\n";
  }
  if (rank_step_ms.size() > 1) {
    o << "  ranks: step ms";
    size_t slowest = 0, fastest = 0;
    for (size_t k = 0; k < rank_step_ms.size(); ++k) {
      o << (k == 0 ? " " : ", ") << fmt("%.2f", rank_step_ms[k]) << " (rank " << k << ")";
      if (rank_step_ms[k] > rank_step_ms[slowest]) slowest = k;
      if (rank_step_ms[k] < rank_step_ms[fastest]) fastest = k;
    }
    if (rank_step_ms[fastest] > 0) {
      o << "; slowest rank " << slowest << ", "
        << fmt("%+.1f%%", 100.0 * (rank_step_ms[slowest] / rank_step_ms[fastest] - 1.0))
        << " over the fastest";
    }
    o << "\n";
  }
  if (gpu.available && gpu.samples > 0) {
    o << "  NVML: utilization " << fmt("%.0f%%", gpu.util_mean_pct) << " mean / "
      << fmt("%.0f%%", gpu.util_max_pct) << " max, memory bus " << fmt("%.0f%%", gpu.mem_util_mean_pct)
      << ", SM " << fmt("%.0f", gpu.sm_clock_mean_mhz) << " MHz, " << fmt("%.0f", gpu.power_mean_w) << " W ("
      << gpu.samples << " samples)\n";
  } else if (c.device.rfind("cuda", 0) == 0) {
    o << "  NVML: not available (" << gpu.reason << ")\n";
  }
  o << "  memory:";
  if (device_memory_peak_allocated) {
    o << " device peak " << format_bytes(*device_memory_peak_allocated) << " allocated";
    if (device_memory_peak_reserved) o << " / " << format_bytes(*device_memory_peak_reserved) << " reserved";
    if (device_memory_total) o << " of " << format_bytes(*device_memory_total);
    if (device_memory_steady_peak_allocated) {
      o << " (after warm-up: " << format_bytes(*device_memory_steady_peak_allocated) << " allocated)";
    }
    o << ";";
  }
  o << " host peak RSS " << (host_peak_rss ? format_bytes(*host_peak_rss) : std::string("not measured"))
    << "\n";
  o << "  CPU:";
  if (main_thread_cpu_pct) o << " main thread " << fmt("%.0f%%", *main_thread_cpu_pct);
  if (workers_cpu_pct_mean)
    o << ", loader workers " << fmt("%.0f%%", *workers_cpu_pct_mean) << " each (mean)";
  if (loader.present && loader.worker_busy_pct_mean) {
    o << ", workers busy " << fmt("%.0f%%", *loader.worker_busy_pct_mean) << " of the step time";
  }
  o << " (process " << fmt("%.1f", process_cpu_seconds) << " CPU s)\n";
  o << "  verdict: " << verdict.kind << ": " << verdict.evidence << "\n";
  if (!verdict.suggestion.empty()) o << "  try: " << verdict.suggestion << "\n";
  return o.str();
}

// ---------------------------------------------------------------------------------------------------------
// Trace

void write_trace(const std::string& path, const Profiler& profiler, const GpuSampler* sampler,
                 const RunConfig& config) {
  const double origin = profiler.origin_s();
  auto us = [&](double s) { return (s - origin) * 1e6; };
  constexpr int kHostPid = 1;
  constexpr int kDevicePid = 2;
  json events = json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", kHostPid}, {"tid", 0}, {"args", {{"name", "host"}}}});
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kDevicePid},
                    {"tid", 0},
                    {"args", {{"name", "device " + config.device}}}});
  std::map<int64_t, std::string> thread_names;
  for (const platform::ThreadCpu& t : platform::registered_thread_cpu()) thread_names[t.tid] = t.name;
  thread_names[profiler.main_thread_id()] = "main";
  const std::vector<TraceSpan> spans = profiler.trace_spans();
  std::map<int64_t, bool> used_tids;
  for (const TraceSpan& s : spans) {
    const int64_t tid = s.device ? -1 - s.tid : s.tid;  // device streams: tid 0 compute, 1 copy, 2 comm
    used_tids[s.device ? -1 - tid : tid] = true;
    json e = {{"name", s.name},
              {"cat", s.device ? "device" : "host"},
              {"ph", "X"},
              {"ts", us(s.begin_s)},
              {"dur", std::max(0.0, (s.end_s - s.begin_s) * 1e6)},
              {"pid", s.device ? kDevicePid : kHostPid},
              {"tid", tid}};
    if (s.step >= 0) e["args"] = {{"step", s.step}};
    events.push_back(std::move(e));
  }
  for (int k = 0; k < kNumStreams; ++k) {
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", kDevicePid},
         {"tid", k},
         {"args", {{"name", std::string(stream_name(static_cast<StreamKind>(k))) + " stream"}}}});
  }
  for (const auto& [tid, name] : thread_names) {
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", kHostPid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  if (sampler != nullptr) {
    for (const TimedGpuSample& s : sampler->gpu_samples()) {
      if (!s.sample.valid) continue;
      events.push_back({{"name", "GPU utilization %"},
                        {"ph", "C"},
                        {"pid", kDevicePid},
                        {"ts", us(s.t)},
                        {"args", {{"util", s.sample.utilization_gpu}}}});
      events.push_back({{"name", "GPU memory used MiB"},
                        {"ph", "C"},
                        {"pid", kDevicePid},
                        {"ts", us(s.t)},
                        {"args", {{"used", static_cast<double>(s.sample.memory_used) / (1024.0 * 1024.0)}}}});
      events.push_back({{"name", "GPU power W"},
                        {"ph", "C"},
                        {"pid", kDevicePid},
                        {"ts", us(s.t)},
                        {"args", {{"power", s.sample.power_mw / 1000.0}}}});
    }
    // Thread CPU % between consecutive samples.
    const std::vector<TimedThreadCpu> cpu = sampler->cpu_samples();
    for (size_t i = 1; i < cpu.size(); ++i) {
      const double dt = cpu[i].t - cpu[i - 1].t;
      if (dt <= 0) continue;
      json args = json::object();
      for (const platform::ThreadCpu& t : cpu[i].threads) {
        for (const platform::ThreadCpu& p : cpu[i - 1].threads) {
          if (p.tid == t.tid && p.name == t.name) args[t.name] = 100.0 * (t.cpu_seconds - p.cpu_seconds) / dt;
        }
      }
      if (!args.empty()) {
        events.push_back(
            {{"name", "thread CPU %"}, {"ph", "C"}, {"pid", kHostPid}, {"ts", us(cpu[i].t)}, {"args", args}});
      }
    }
  }
  json root = {{"traceEvents", events},
               {"displayTimeUnit", "ms"},
               {"otherData", {{"schema", kTraceSchema}, {"device", config.device}, {"model", config.model}}}};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IOError("cannot write the trace to '" + path + "'");
  out << root.dump() << "\n";
  out.flush();
  if (!out) throw IOError("writing the trace to '" + path + "' failed");
}

// ---------------------------------------------------------------------------------------------------------
// RunMonitor

RunMonitor::RunMonitor(RunConfig config, Device device, ProfilerOptions options, GpuSamplerOptions sampler)
    : config_(std::move(config)),
      device_(device),
      profiler_(with_warmup_hook(options)),
      sampler_(device, sampler) {
  if (config_.host_cores == 0) config_.host_cores = platform::host_cores();
  if (config_.device.empty() || config_.device == "cpu") config_.device = device.str();
}

RunMonitor::~RunMonitor() {
  sampler_.stop();
}

ProfilerOptions RunMonitor::with_warmup_hook(ProfilerOptions options) {
  auto previous = options.on_warmup_end;
  options.on_warmup_end = [this, previous] {
    if (previous) previous();
#if LIFTOFF_WITH_CUDA
    // The peak so far (autotuning included) is kept; the allocator's watermark restarts for the steady state.
    if (device_.is_cuda()) {
      const cuda::AllocatorStats a = cuda::CachingAllocator::get().stats(device_.index);
      warmup_peak_allocated_ = static_cast<int64_t>(a.peak_allocated);
      warmup_peak_reserved_ = static_cast<int64_t>(a.peak_reserved);
      cuda::CachingAllocator::get().reset_peak(device_.index);
      steady_watermark_ = true;
    }
#endif
  };
  return options;
}

void RunMonitor::start() {
  if (started_) return;
  started_ = true;
  platform::register_current_thread("main");
  profiler_.set_device(device_);
#if LIFTOFF_WITH_CUDA
  if (device_.is_cuda()) cuda::CachingAllocator::get().reset_peak(device_.index);
#endif
  start_s_ = now_s();
  start_cpu_ = platform::registered_thread_cpu();
  sampler_.start();
}

RunReport RunMonitor::finish(const LoaderStats* loader, std::optional<CommTimes> comm,
                             std::optional<GraphReport> graphs) {
  LIFTOFF_CHECK(started_ && !finished_, ValueError, "RunMonitor::finish: call start() once before finish()");
  finished_ = true;
  profiler_.abandon_step();
  profiler_.finish();
  sampler_.stop();
  const double end_s = now_s();
  RunMeasurements m;
  m.comm = comm;
  m.graphs = std::move(graphs);
  m.profile = profiler_.summary();
  m.gpu = sampler_.summary(m.profile.windows);
  if (loader != nullptr) m.loader = loader_report(*loader, m.profile.all_steps_wall_ms * 1e-3);
#if LIFTOFF_WITH_CUDA
  if (device_.is_cuda()) {
    const cuda::AllocatorStats a = cuda::CachingAllocator::get().stats(device_.index);
    const auto peak = static_cast<int64_t>(a.peak_allocated);
    m.device_memory_peak_allocated = std::max(peak, warmup_peak_allocated_);
    m.device_memory_peak_reserved = std::max(static_cast<int64_t>(a.peak_reserved), warmup_peak_reserved_);
    if (steady_watermark_) m.device_memory_steady_peak_allocated = peak;
  }
#endif
  const int64_t rss = platform::peak_rss_bytes();
  if (rss >= 0) m.host_peak_rss = rss;
  m.process_cpu_seconds = platform::process_cpu_seconds();

  // Thread CPU: from the 1 Hz samples that fall inside the measured steps when there are enough of them,
  // else from the start/end snapshots over the whole run.
  const std::vector<platform::ThreadCpu> end_cpu = platform::registered_thread_cpu();
  const std::vector<TimedThreadCpu> samples = sampler_.cpu_samples();
  auto inside = [&](double t) {
    for (const auto& w : m.profile.windows) {
      if (t >= w.first && t <= w.second) return true;
    }
    return false;
  };
  std::map<int64_t, std::pair<double, double>> sampled;  // tid -> (cpu s, wall s)
  double sampled_wall = 0.0;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (!inside(samples[i - 1].t) || !inside(samples[i].t)) continue;
    const double dt = samples[i].t - samples[i - 1].t;
    sampled_wall += dt;
    for (const platform::ThreadCpu& t : samples[i].threads) {
      for (const platform::ThreadCpu& p : samples[i - 1].threads) {
        if (p.tid != t.tid || p.name != t.name) continue;
        auto& acc = sampled[t.tid];
        acc.first += t.cpu_seconds - p.cpu_seconds;
        acc.second += dt;
      }
    }
  }
  // Sampled figures need at least 2 s of covered step time (1 Hz samples, 10 ms /proc ticks).
  const bool use_samples = sampled_wall >= 2.0;
  m.cpu_source = use_samples ? "sampled" : "run";
  const double run_wall = end_s - start_s_;
  for (const platform::ThreadCpu& t : end_cpu) {
    if (t.name == "gpu-sampler") continue;
    ThreadCpuReport tr;
    tr.name = t.name;
    tr.tid = t.tid;
    if (use_samples) {
      const auto it = sampled.find(t.tid);
      if (it == sampled.end() || it->second.second <= 0) continue;
      tr.cpu_seconds = it->second.first;
      tr.busy_pct = 100.0 * it->second.first / it->second.second;
    } else {
      double before = 0.0;
      for (const platform::ThreadCpu& s : start_cpu_) {
        if (s.tid == t.tid && s.name == t.name) before = s.cpu_seconds;
      }
      tr.cpu_seconds = std::max(0.0, t.cpu_seconds - before);
      if (run_wall > 0) tr.busy_pct = 100.0 * tr.cpu_seconds / run_wall;
    }
    m.threads.push_back(std::move(tr));
  }
  return build_report(config_, m);
}

std::string RunMonitor::progress_text() const {
  std::string s = fmt("%.0f", profiler_.recent_images_per_second()) + " img/s";
  if (const auto g = sampler_.latest(); g && g->sample.valid) {
    s += " | GPU " + std::to_string(g->sample.utilization_gpu) + "%";
  }
#if LIFTOFF_WITH_CUDA
  if (device_.is_cuda()) {
    s += " | mem " +
         format_bytes(static_cast<int64_t>(cuda::CachingAllocator::get().stats(device_.index).allocated));
    return s;
  }
#endif
  const int64_t rss = platform::current_rss_bytes();
  if (rss >= 0) s += " | RSS " + format_bytes(rss);
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// Metrics log

MetricsLog::MetricsLog(const std::string& path)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw IOError("cannot write the metrics log '" + path + "'");
}

void MetricsLog::write(const MetricsRecord& r) {
  json j = {{"step", r.step},
            {"epoch", r.epoch},
            {"loss", opt(r.loss)},
            {"lr", r.lr},
            {"images_per_s", r.images_per_second},
            {"step_ms", r.step_ms},
            {"elapsed_s", r.elapsed_s},
            {"gpu_util_pct", opt(r.gpu_util_pct)},
            {"device_memory", opt(r.device_memory)}};
  out_ << j.dump() << "\n";
  out_.flush();
  if (!out_) throw IOError("writing the metrics log '" + path_ + "' failed");
}

}  // namespace liftoff

// ---------------------------------------------------------------------------------------------------------
// Comparison of two runs

namespace liftoff {

namespace {

std::string ratio_text(double a, double b) {
  if (a <= 0.0 && b <= 0.0) return "-";
  if (b <= 0.0) return "inf";
  return fmt("%.2fx", a / b);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string run_label(const RunReport& r) {
  return r.config.device + ", " + (r.config.model.empty() ? "?" : r.config.model) + ", batch " +
         std::to_string(r.config.batch) + " x " + std::to_string(r.config.accum) + ", amp " + r.config.amp;
}

// One row per line: {label, a text, b text, speedup text}.
std::vector<std::array<std::string, 4>> comparison_rows(const RunReport& a, const RunReport& b) {
  std::vector<std::array<std::string, 4>> rows;
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& x = a.stages[static_cast<size_t>(i)];
    const StageReport& y = b.stages[static_cast<size_t>(i)];
    rows.push_back({std::string(stage_name(static_cast<Stage>(i))) + " (host)", fmt("%.3f", x.host_ms),
                    fmt("%.3f", y.host_ms), ratio_text(x.host_ms, y.host_ms)});
    if (x.device_ms || y.device_ms) {
      rows.push_back({std::string(stage_name(static_cast<Stage>(i))) + " (device)",
                      x.device_ms ? fmt("%.3f", *x.device_ms) : "-",
                      y.device_ms ? fmt("%.3f", *y.device_ms) : "-",
                      x.device_ms && y.device_ms ? ratio_text(*x.device_ms, *y.device_ms) : "-"});
    }
  }
  rows.push_back({"step", fmt("%.3f", a.step_ms_mean), fmt("%.3f", b.step_ms_mean),
                  ratio_text(a.step_ms_mean, b.step_ms_mean)});
  rows.push_back({"images/s", fmt("%.1f", a.images_per_second), fmt("%.1f", b.images_per_second),
                  ratio_text(b.images_per_second, a.images_per_second)});
  auto opt_pct = [](const std::optional<double>& v) { return v ? fmt("%.0f%%", *v) : std::string("-"); };
  rows.push_back({"GPU busy (events)", opt_pct(a.device_busy_pct), opt_pct(b.device_busy_pct), ""});
  auto nvml = [](const RunReport& r) {
    return r.gpu.available && r.gpu.samples > 0 ? fmt("%.0f%%", r.gpu.util_mean_pct) : std::string("-");
  };
  rows.push_back({"GPU util (NVML)", nvml(a), nvml(b), ""});
  auto mem = [](const RunReport& r) {
    return r.device_memory_peak_allocated ? format_bytes(*r.device_memory_peak_allocated) : std::string("-");
  };
  rows.push_back({"device memory peak", mem(a), mem(b), ""});
  auto rss = [](const RunReport& r) {
    return r.host_peak_rss ? format_bytes(*r.host_peak_rss) : std::string("-");
  };
  rows.push_back({"host peak RSS", rss(a), rss(b), ""});
  rows.push_back({"verdict", a.verdict.kind, b.verdict.kind, ""});
  return rows;
}

}  // namespace

std::string render_comparison(const RunReport& a, const RunReport& b, const std::string& name_a,
                              const std::string& name_b) {
  std::ostringstream o;
  o << "A: " << name_a << " (" << run_label(a) << ")\n";
  o << "B: " << name_b << " (" << run_label(b) << ")\n";
  char line[200];
  std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", "ms/step", "A", "B", "A/B");
  o << line;
  for (const auto& row : comparison_rows(a, b)) {
    if (row[0] == "verdict") continue;
    std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), row[3].c_str());
    o << line;
  }
  o << "  (A/B > 1: B is faster; for images/s the ratio is B/A)\n";
  o << "  verdict A: " << a.verdict.kind
    << (a.verdict.suggestion.empty() ? "" : " (try " + a.verdict.suggestion + ")") << "\n";
  o << "  verdict B: " << b.verdict.kind
    << (b.verdict.suggestion.empty() ? "" : " (try " + b.verdict.suggestion + ")") << "\n";
  return o.str();
}

std::string comparison_html(const RunReport& a, const RunReport& b, const std::string& name_a,
                            const std::string& name_b) {
  static const char* kColors[kNumStages] = {"#e4572e", "#f3a712", "#a8c686", "#29335c",
                                            "#669bbc", "#8e44ad", "#17becf", "#bbbbbb"};
  // One bar of host ms/step per run (they add up to the step), and for a run with CUDA event timings a
  // second bar of device ms/step per stage: with the device as the limit (CUDA graphs), the host bar is
  // mostly data wait (back-pressure) and the device bar shows where the time goes.
  struct Bar {
    std::string label;
    std::array<double, kNumStages> ms{};
    double total = 0.0;
    std::string total_text;
  };
  std::vector<Bar> bars;
  const RunReport* runs[2] = {&a, &b};
  const std::string names[2] = {name_a, name_b};
  for (int k = 0; k < 2; ++k) {
    const RunReport& r = *runs[k];
    Bar host;
    for (int i = 0; i < kNumStages; ++i)
      host.ms[static_cast<size_t>(i)] = r.stages[static_cast<size_t>(i)].host_ms;
    host.total = r.step_ms_mean;
    host.total_text = fmt("%.2f", r.step_ms_mean) + " ms";
    Bar dev;
    for (int i = 0; i < kNumStages; ++i) {
      const auto& d = r.stages[static_cast<size_t>(i)].device_ms;
      dev.ms[static_cast<size_t>(i)] = d ? *d : 0.0;
      dev.total += dev.ms[static_cast<size_t>(i)];
    }
    const bool has_device = dev.total > 0.0;
    host.label = names[k] + (has_device ? " (host)" : "");
    bars.push_back(host);
    if (has_device) {
      dev.label = names[k] + " (device)";
      dev.total_text = fmt("%.2f", dev.total) + " ms on the device";
      bars.push_back(dev);
    }
  }
  double max_ms = 1e-9;
  size_t longest = 0;
  for (const Bar& bar : bars) {
    max_ms = std::max(max_ms, bar.total);
    longest = std::max(longest, bar.label.size());
  }
  // The label column grows with the longest label (about 7 px a character at 12 px sans-serif).
  const int left = std::max(150, 7 * static_cast<int>(longest) + 24), width = 600, bar_h = 34, top = 20;
  const int rows = static_cast<int>(bars.size());
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 180 << "\" height=\""
      << top + rows * (bar_h + 16) + 60 << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  for (int k = 0; k < rows; ++k) {
    const Bar& bar = bars[static_cast<size_t>(k)];
    const int y = top + k * (bar_h + 16);
    svg << "<text x=\"" << left - 8 << "\" y=\"" << y + bar_h / 2 + 4 << "\" text-anchor=\"end\">"
        << html_escape(bar.label) << "</text>\n";
    double x = left;
    for (int i = 0; i < kNumStages; ++i) {
      const double ms = bar.ms[static_cast<size_t>(i)];
      const double w = width * ms / max_ms;
      if (w <= 0) continue;
      svg << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w)
          << "\" height=\"" << bar_h << "\" fill=\"" << kColors[i] << "\"><title>"
          << stage_name(static_cast<Stage>(i)) << ": " << fmt("%.3f", ms) << " ms/step</title></rect>\n";
      x += w;
    }
    svg << "<text x=\"" << fmt("%.2f", x + 6) << "\" y=\"" << y + bar_h / 2 + 4 << "\">" << bar.total_text
        << "</text>\n";
  }
  const int ly = top + rows * (bar_h + 16) + 10;
  for (int i = 0; i < kNumStages; ++i) {
    const int lx = left + i * 85;
    svg << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"12\" fill=\"" << kColors[i]
        << "\"/>"
        << "<text x=\"" << lx + 16 << "\" y=\"" << ly + 10 << "\">" << stage_name(static_cast<Stage>(i))
        << "</text>\n";
  }
  svg << "</svg>\n";

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Liftoff: " << html_escape(name_a)
    << " vs " << html_escape(name_b) << "</title>\n<style>body{font-family:sans-serif;margin:2em}"
    << "table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}"
    << "td:first-child,th:first-child{text-align:left}</style></head><body>\n";
  o << "<h1>" << html_escape(name_a) << " vs " << html_escape(name_b) << "</h1>\n";
  o << "<p>A: " << html_escape(run_label(a)) << "<br>B: " << html_escape(run_label(b)) << "</p>\n";
  o << "<h2>Step time by stage (host ms/step; device ms/step where CUDA events timed it)</h2>\n" << svg.str();
  o << "<h2>Side by side</h2>\n<table><tr><th>ms/step</th><th>A</th><th>B</th><th>A/B</th></tr>\n";
  for (const auto& row : comparison_rows(a, b)) {
    o << "<tr><td>" << html_escape(row[0]) << "</td><td>" << html_escape(row[1]) << "</td><td>"
      << html_escape(row[2]) << "</td><td>" << html_escape(row[3]) << "</td></tr>\n";
  }
  o << "</table>\n<p>A/B &gt; 1: B is faster (for images/s the ratio is B/A).</p>\n";
  o << "<h2>Verdicts</h2>\n<p>A: <b>" << html_escape(a.verdict.kind)
    << "</b>: " << html_escape(a.verdict.evidence)
    << (a.verdict.suggestion.empty() ? "" : "; try <code>" + html_escape(a.verdict.suggestion) + "</code>")
    << "</p>\n";
  o << "<p>B: <b>" << html_escape(b.verdict.kind) << "</b>: " << html_escape(b.verdict.evidence)
    << (b.verdict.suggestion.empty() ? "" : "; try <code>" + html_escape(b.verdict.suggestion) + "</code>")
    << "</p>\n";
  o << "</body></html>\n";
  return o.str();
}

}  // namespace liftoff
