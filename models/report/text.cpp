// RunReport::render_table: the table every run ends with.
#include <cstdio>
#include <sstream>

#include "models/report/facts.h"
#include "models/report/format.h"
#include "models/report/run_report.h"
#include "runtime/profile/flops.h"

namespace liftoff {

namespace {

using report_format::fmt;

void stage_rows(const RunReport& r, std::ostringstream& o) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-11s %12s %7s %14s %7s\n", "stage", "host ms/step", "share",
                "device ms/step", "share");
  o << line;
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& s = r.stages[static_cast<size_t>(i)];
    const std::string dev = s.device_ms ? fmt("%.3f", *s.device_ms) : "-";
    const std::string dev_share = s.device_share ? fmt("%.1f%%", 100.0 * *s.device_share) : "";
    // Micro-batches on concurrent streams: their forward/backward intervals overlap, so the shares add up
    // to more than the step.
    const bool overlapping =
        r.graphs.streams > 1 && s.device_ms &&
        (static_cast<Stage>(i) == Stage::forward || static_cast<Stage>(i) == Stage::backward);
    // With GPU decoding the loader's h2d row is its decode streams' time (nvJPEG next to the model), per
    // batch.
    const bool decode_streams = static_cast<Stage>(i) == Stage::h2d && gpu_decoding(r.config);
    const std::string note = decode_streams ? "  (loader events: GPU decode streams, per batch)"
                             : s.device_source == "loader" ? "  (loader events)"
                             : overlapping
                                 ? "  (" + std::to_string(r.graphs.streams) + " streams, overlapping)"
                                 : "";
    std::snprintf(line, sizeof line, "  %-11s %12.3f %6.1f%% %14s %7s%s\n", stage_name(static_cast<Stage>(i)),
                  s.host_ms, 100.0 * s.host_share, dev.c_str(), dev_share.c_str(), note.c_str());
    o << line;
  }
  std::snprintf(line, sizeof line, "  %-11s %12.3f %6.1f%%   (min %.3f, max %.3f, std %.3f)\n", "step",
                r.step_ms_mean, 100.0, r.step_ms_min, r.step_ms_max, r.step_ms_std);
  o << line;
}

void throughput_lines(const RunReport& r, std::ostringstream& o) {
  o << "  throughput " << fmt("%.1f", r.images_per_second) << " images/s";
  if (r.device_busy_pct) o << " | GPU busy " << fmt("%.0f%%", *r.device_busy_pct) << " (CUDA events)";
  if (r.device_lag_ms) o << " | device lag " << fmt("%.2f", *r.device_lag_ms) << " ms";
  o << "\n";
  const RunConfig& c = r.config;
  if (c.model_flops_per_image > 0) {
    o << "  compute "
      << compute_rate_text(compute_rate(c.model_flops_per_image, r.images_per_second, c.device_name,
                                        peak_precision(c.device, c.amp)))
      << "\n";
  }
  if (r.allreduce_exposed_ms) {
    o << "  all-reduce " << fmt("%.3f", *r.allreduce_exposed_ms) << " ms/step exposed, "
      << (r.allreduce_overlapped_ms ? fmt("%.3f", *r.allreduce_overlapped_ms) + " ms/step overlapped\n"
                                    : std::string("overlap not measured (CPU: host wait only)\n"));
  }
}

void graph_lines(const RunReport& r, std::ostringstream& o) {
  const GraphReport& g = r.graphs;
  if (g.used) {
    o << "  CUDA graphs: " << g.graph_steps << " steps replayed one graph of " << g.nodes
      << " nodes (captured at step " << g.captured_at_step << "), " << g.eager_steps << " eager"
      << (g.reason.empty() ? std::string() : "; then stopped: " + g.reason) << "\n";
    if (g.streams > 1) {
      o << "  micro-batches: on " << g.streams
        << " concurrent streams (their forward/backward device times overlap)\n";
    } else if (!g.streams_reason.empty() && r.config.accum > 1) {
      o << "  micro-batches: one stream (" << g.streams_reason << ")\n";
    }
  } else if (report_format::is_cuda(r.config.device)) {
    o << "  CUDA graphs: not used ("
      << (!g.reason.empty() ? g.reason
          : g.mode == "off" ? std::string("--cuda-graphs off")
                            : std::string("no step was captured"))
      << ")\n";
  }
}

// Why a short run's first steps are slow: the searches ran inside them (or were restored from the store).
void startup_line(const RunReport& r, std::ostringstream& o) {
  if (r.algorithm_searches == 0 && r.algorithms_restored == 0) return;
  o << "  start-up: ";
  if (r.algorithm_searches > 0) {
    o << r.algorithm_searches << " cuDNN algorithm searches took " << fmt("%.2f", r.algorithm_search_seconds)
      << " s (each convolution shape and direction on its first use: the warm-up steps, an evaluation's "
         "first batches)";
  }
  if (r.algorithms_restored > 0) {
    o << (r.algorithm_searches > 0 ? "; " : "") << r.algorithms_restored
      << " cuDNN algorithm choices restored from an earlier run's store (no search)";
  }
  if (!r.algorithm_store.empty()) o << "; store " << r.algorithm_store << " (LIFTOFF_CONV_CACHE)";
  o << "\n";
}

void rank_line(const std::vector<double>& step_ms, std::ostringstream& o) {
  if (step_ms.size() <= 1) return;
  o << "  ranks: step ms";
  size_t slowest = 0, fastest = 0;
  for (size_t k = 0; k < step_ms.size(); ++k) {
    o << (k == 0 ? " " : ", ") << fmt("%.2f", step_ms[k]) << " (rank " << k << ")";
    if (step_ms[k] > step_ms[slowest]) slowest = k;
    if (step_ms[k] < step_ms[fastest]) fastest = k;
  }
  if (step_ms[fastest] > 0) {
    o << "; slowest rank " << slowest << ", "
      << fmt("%+.1f%%", 100.0 * (step_ms[slowest] / step_ms[fastest] - 1.0)) << " over the fastest";
  }
  o << "\n";
}

void nvml_line(const RunReport& r, std::ostringstream& o) {
  const GpuUtilization& g = r.gpu;
  if (g.available && g.samples > 0) {
    o << "  NVML: utilization " << fmt("%.0f%%", g.util_mean_pct) << " mean / "
      << fmt("%.0f%%", g.util_max_pct) << " max, memory bus " << fmt("%.0f%%", g.mem_util_mean_pct) << ", SM "
      << fmt("%.0f", g.sm_clock_mean_mhz) << " MHz, " << fmt("%.0f", g.power_mean_w) << " W (" << g.samples
      << " samples)\n";
  } else if (report_format::is_cuda(r.config.device)) {
    o << "  NVML: not available (" << g.reason << ")\n";
  }
}

void memory_line(const RunReport& r, std::ostringstream& o) {
  o << "  memory:";
  if (r.device_memory_peak_allocated) {
    o << " device peak " << format_bytes(*r.device_memory_peak_allocated) << " allocated";
    if (r.device_memory_peak_reserved)
      o << " / " << format_bytes(*r.device_memory_peak_reserved) << " reserved";
    if (r.device_memory_total) o << " of " << format_bytes(*r.device_memory_total);
    if (r.device_memory_steady_peak_allocated) {
      o << " (after warm-up: " << format_bytes(*r.device_memory_steady_peak_allocated) << " allocated)";
    }
    o << ";";
  }
  o << " host peak RSS " << (r.host_peak_rss ? format_bytes(*r.host_peak_rss) : std::string("not measured"))
    << "\n";
}

void cpu_line(const RunReport& r, std::ostringstream& o) {
  o << "  CPU:";
  if (r.main_thread_cpu_pct) o << " main thread " << fmt("%.0f%%", *r.main_thread_cpu_pct);
  if (r.workers_cpu_pct_mean)
    o << ", loader workers " << fmt("%.0f%%", *r.workers_cpu_pct_mean) << " each (mean)";
  if (r.loader.present && r.loader.worker_busy_pct_mean) {
    o << ", workers busy " << fmt("%.0f%%", *r.loader.worker_busy_pct_mean) << " of the measured steps' time";
    if (r.loader.worker_slot_wait_pct_mean)
      o << ", waiting for the device to release slots " << fmt("%.0f%%", *r.loader.worker_slot_wait_pct_mean);
  }
  o << " (process " << fmt("%.1f", r.process_cpu_seconds) << " CPU s)\n";
}

}  // namespace

std::string RunReport::render_table() const {
  std::ostringstream o;
  const RunConfig& c = config;
  o << "Utilization report: " << steps_measured << " steps measured";
  if (warmup_steps_excluded > 0) o << " (after " << warmup_steps_excluded << " warm-up)";
  o << ", " << c.device << ", batch " << c.batch << " x accum " << c.accum;
  if (!c.activation_layout.empty()) o << ", activations " << c.activation_layout;
  o << "\n";
  if (!loader.skipped_files.empty()) {
    o << "  skipped: " << loader.skipped_files.size() << " of " << loader.files_total
      << " files (--on-bad-sample skip; first: " << loader.skipped_files.front().path << "; full list in "
      << "the report JSON and --log)\n";
  }
  if (steps_measured == 0) {
    o << "  no training step was measured\n";
    return o.str();
  }
  stage_rows(*this, o);
  throughput_lines(*this, o);
  graph_lines(*this, o);
  startup_line(*this, o);
  rank_line(rank_step_ms, o);
  nvml_line(*this, o);
  memory_line(*this, o);
  cpu_line(*this, o);
  o << "  verdict: " << verdict.kind << ": " << verdict.evidence << "\n";
  if (!verdict.suggestion.empty()) o << "  try: " << verdict.suggestion << "\n";
  return o.str();
}

}  // namespace liftoff
