// Assembling a RunReport from what was measured: the pure function build_report (tested on recorded
// numbers) and the loader's stats as the report's loader section.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/report/run_report.h"
#include "runtime/profile/gpu_sampler.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

struct LoaderStats;  // data/loader.h

// Gradient communication per measured step, from DistributedDataParallel's stats (models/train/ddp.h).
struct CommTimes {
  bool device_timed = false;   // CUDA: comm-stream events; CPU (MPI): only the host wait is known
  double comm_ms = 0.0;        // all-reduce time on the communication stream (device_timed only)
  double exposed_ms = 0.0;     // what the step waited for it (device: compute stream; CPU: host)
  double overlapped_ms = 0.0;  // comm_ms - exposed_ms: hidden behind backward (device_timed only)
};

// Everything measured about a run, as build_report consumes it.
struct RunMeasurements {
  ProfileSummary profile;
  std::optional<CommTimes> comm;      // DDP runs
  std::optional<GraphReport> graphs;  // CUDA graphs of the run (the verdict weighs them)
  std::optional<GpuUtilization> gpu;  // none: no sampler ran
  std::optional<LoaderReport> loader;
  std::optional<int64_t> device_memory_peak_allocated, device_memory_peak_reserved, device_memory_total;
  std::optional<int64_t> device_memory_steady_peak_allocated;
  std::optional<int64_t> host_peak_rss;
  std::vector<ThreadCpuReport> threads;
  std::string cpu_source;
  double process_cpu_seconds = 0.0;
};

// Assembles the report (stage table, shares, busy figures) and sets its verdict (rules.h diagnose).
RunReport build_report(const RunConfig& config, const RunMeasurements& m);
// Loader stats -> the report's loader section; steps_wall_s: wall time of all steps it served.
LoaderReport loader_report(const LoaderStats& stats, double steps_wall_s);

}  // namespace liftoff
