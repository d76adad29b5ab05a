#include "models/report/facts.h"

#include <algorithm>

#include "models/report/format.h"

namespace liftoff {

namespace {

using report_format::fmt;
using report_format::pct;

double host(const RunReport& r, Stage s) {
  return r.stages[static_cast<size_t>(s)].host_ms;
}

std::optional<double> device(const RunReport& r, Stage s) {
  return r.stages[static_cast<size_t>(s)].device_ms;
}

// The GPU's busy fraction and the phrase saying how it was measured.
void busy_facts(const RunReport& r, const VerdictThresholds& th, VerdictFacts& f) {
  const GpuUtilization& g = r.gpu;
  if (r.device_busy_pct) {
    f.busy = *r.device_busy_pct / 100.0;
    f.busy_text = "GPU busy " + pct(*f.busy) + " of the step (CUDA events)";
    if (g.available && g.samples > 0 && g.samples < th.nvml_min_samples) {
      f.busy_text += ", NVML " + std::to_string(g.samples) + " sample(s) only, not used";
    } else if (g.available && g.samples > 0) {
      f.busy_text += ", NVML utilization " + fmt("%.0f%%", g.util_mean_pct);
      // Event spans include the gaps between kernels inside a stage (an upper bound); NVML counts time a
      // kernel was running. A launch-bound step shows spans near 100% but low NVML utilization: trust the
      // lower.
      if (g.util_mean_pct / 100.0 < *f.busy) {
        f.busy = g.util_mean_pct / 100.0;
        f.busy_text += " (the lower figure is used)";
      }
    }
  } else if (g.available && g.samples >= th.nvml_min_samples) {
    f.busy = g.util_mean_pct / 100.0;
    f.busy_text = "GPU utilization " + fmt("%.0f%%", g.util_mean_pct) + " (NVML, " +
                  std::to_string(g.samples) + " samples; no CUDA event timings)";
  } else if (f.cuda && g.available && g.samples > 0) {
    f.busy_text = "GPU busy not measured (no CUDA event timings; NVML " + std::to_string(g.samples) +
                  " sample(s) only, not used)";
  } else if (f.cuda) {
    f.busy_text = "GPU busy not measured (no CUDA event timings; NVML: " +
                  (g.reason.empty() ? std::string("not sampled") : g.reason) + ")";
  }
}

void share_facts(const RunReport& r, VerdictFacts& f) {
  const double wall = f.wall_ms;
  f.wait_ms = host(r, Stage::data_wait);
  // GPU decode: the host hands the batch out at once and the compute stream waits for its decode event; a
  // wait there is the device idling for input, whatever the host's lead.
  const std::optional<double> device_wait = device(r, Stage::data_wait);
  f.device_wait = device_wait && *device_wait > f.wait_ms;
  if (f.device_wait) f.wait_ms = *device_wait;
  f.wait_share = f.wait_ms / wall;
  const double h2d_host_ms = host(r, Stage::h2d);
  std::optional<double> h2d_device = device(r, Stage::h2d);
  if (f.cuda && gpu_decoding(r.config) && h2d_device) {
    f.gpu_decode_ms = h2d_device;  // the decode streams' time, not a copy (measured on the H200: 141 ms per
    h2d_device.reset();            // batch next to a 32 ms step once read as "copy-bound at 0.1 GB/s")
  }
  f.host_copy = f.cuda && h2d_host_ms > h2d_device.value_or(0.0);
  f.has_h2d = h2d_device.has_value() || f.host_copy;
  f.h2d_ms = f.host_copy ? h2d_host_ms : h2d_device.value_or(0.0);
  f.h2d_share = f.h2d_ms / wall;
  f.has_comm = r.allreduce_exposed_ms.has_value();
  f.comm_ms = r.allreduce_exposed_ms.value_or(0.0);
  if (!f.has_comm && !f.cuda && host(r, Stage::allreduce) > 0) {  // CPU (MPI): host time
    f.has_comm = true;
    f.comm_ms = host(r, Stage::allreduce);
  }
  f.comm_share = f.comm_ms / wall;
  f.compute_ms = host(r, Stage::forward) + host(r, Stage::backward) + host(r, Stage::optimizer);
  f.compute_share = f.compute_ms / wall;
  f.other_share = host(r, Stage::other) / wall;
  f.shares_text = "data wait " + pct(f.wait_share) +
                  (f.has_h2d ? ", H2D copies " + pct(f.h2d_share) : std::string()) + " of the " +
                  f.step_text +
                  (f.gpu_decode_ms ? "; GPU decode streams " + fmt("%.2f", *f.gpu_decode_ms) + " ms per batch"
                                   : std::string());
}

void worker_facts(const RunReport& r, VerdictFacts& f) {
  const RunConfig& c = r.config;
  if (r.loader.present && r.loader.worker_busy_pct_mean) {
    f.workers_busy = *r.loader.worker_busy_pct_mean / 100.0;
    f.workers_text = std::to_string(r.loader.worker_busy_pct.size()) + " workers were " +
                     pct(*f.workers_busy) + " busy (loader busy time)";
  } else if (r.workers_cpu_pct_mean) {
    f.workers_busy = *r.workers_cpu_pct_mean / 100.0;
    f.workers_text = std::to_string(c.workers) + " workers used " + pct(*f.workers_busy) + " CPU each (mean)";
  } else {
    f.workers_text =
        c.workers > 0 ? "worker busy time not available" : "batches are made on the training thread";
  }
}

// A data wait while the device is behind is back-pressure (the loader's buffers are still in the device's
// queue), not a slow input. Behind with our marks covering the step: the device is working through our
// stages. With NVML finding the SMs nearly idle meanwhile, its kernels are too small to fill it (a tiny model
// at a small batch, graph-launched or not): latency, not compute; otherwise its compute holds the run back.
// Behind with our marks covering little of the step: the device waits outside our work (inputs), not
// back-pressure. Tiny kernels show as NVML finding the SMs idle (when it sampled enough), or as a captured
// graph whose node count alone, at the least a node costs, takes half the step.
void device_facts(const RunReport& r, const VerdictThresholds& th, VerdictFacts& f) {
  f.device_behind = f.cuda && r.device_lag_ms && *r.device_lag_ms > f.wall_ms;
  f.host_paced = f.cuda && r.device_lag_ms && *r.device_lag_ms < th.keeps_up_share * f.wall_ms;
  f.inside_marks = r.device_busy_pct && *r.device_busy_pct / 100.0 >= th.gpu_busy;
  const bool nvml = r.gpu.available && r.gpu.samples >= th.nvml_min_samples;
  f.sms_idle = nvml && r.gpu.util_mean_pct / 100.0 < th.sm_idle;
  f.nvml_busy = nvml && r.gpu.util_mean_pct / 100.0 >= th.gpu_busy;
  // Our spans run from a stage's first to its last kernel: a device that keeps up with the host idles in
  // them.
  if (f.host_paced && f.busy && !f.nvml_busy && r.device_busy_pct && *f.busy * 100.0 >= *r.device_busy_pct) {
    f.busy_text += "; the spans include the gaps between kernels, and the device finished each step " +
                   fmt("%.2f", *r.device_lag_ms) + " ms after the host issued it: it idled in them";
  }
  // Concurrent micro-batches split the nodes over parallel paths: the floor is one path's.
  f.node_floor_ms = r.graphs.used ? static_cast<double>(r.graphs.nodes) * th.node_latency_us / 1000.0 /
                                        static_cast<double>(std::max<int64_t>(1, r.graphs.streams))
                                  : 0.0;
  f.many_nodes = f.node_floor_ms >= th.latency_share * f.wall_ms;
  f.latency_bound = f.device_behind && f.inside_marks && (f.sms_idle || f.many_nodes);
  // Saturated workers cannot be waiting for the device to release their slots: the data wait is theirs even
  // with the device behind (on an H100 host 4 workers decoding JPEGs for ResNet-50 were busy throughout the
  // measured steps while the step waited 87% and the device ran 121 ms behind).
  f.workers_saturated = f.workers_busy && *f.workers_busy >= th.workers_saturated;
  f.back_pressure = f.device_behind && f.inside_marks && !f.latency_bound && !f.workers_saturated;
}

}  // namespace

bool gpu_decoding(const RunConfig& config) {
  return config.decode == "gpu" || config.decode == "hybrid";
}

VerdictFacts compute_facts(const RunReport& r, const VerdictThresholds& th) {
  VerdictFacts f;
  f.cuda = report_format::is_cuda(r.config.device);
  f.measured = r.steps_measured > 0 && r.step_ms_mean > 0.0;
  if (!f.measured) return f;  // no denominator: every share stays 0 and unmeasured
  f.wall_ms = r.step_ms_mean;
  f.step_text = "step " + fmt("%.2f", f.wall_ms) + " ms";
  const double measured_s = static_cast<double>(r.steps_measured) * f.wall_ms * 1e-3;
  f.too_short = r.steps_measured < th.min_steps && measured_s < th.min_measured_s;
  f.thin_text = std::to_string(r.steps_measured) + " step" + (r.steps_measured == 1 ? "" : "s") + " (" +
                fmt("%.2f", measured_s) + " s)" +
                (f.cuda ? ", " + std::to_string(r.gpu.available ? r.gpu.samples : 0) + " NVML samples" : "");
  busy_facts(r, th, f);
  share_facts(r, f);
  worker_facts(r, f);
  device_facts(r, th, f);
  return f;
}

}  // namespace liftoff
