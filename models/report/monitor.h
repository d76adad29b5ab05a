// RunMonitor bundles what a run needs to be reported on (Profiler, GpuSampler, CPU snapshots, allocator
// peaks) so the Trainer and tools wire it in a few lines; finish() hands the measurements to build_report.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/report/build.h"
#include "models/report/run_report.h"
#include "runtime/platform/cpu_usage.h"
#include "runtime/profile/gpu_sampler.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

struct LoaderStats;  // data/loader.h

// What a run's logs show at one moment, only what is measured: the latest NVML sample (while the sampler
// runs), the caching allocator's bytes allocated (CUDA devices), the process's resident memory.
struct LiveSample {
  std::optional<double> gpu_util_pct;
  std::optional<int64_t> device_memory;
  std::optional<int64_t> host_rss;
};

// One run's monitoring: a Profiler, a GpuSampler and CPU snapshots.
class RunMonitor {
 public:
  RunMonitor(RunConfig config, Device device, ProfilerOptions options = {}, GpuSamplerOptions sampler = {});
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;  // the profiler's warm-up hook points at this object
  RunMonitor& operator=(const RunMonitor&) = delete;
  Profiler& profiler() { return profiler_; }
  const Profiler& profiler() const { return profiler_; }
  const GpuSampler& sampler() const { return sampler_; }
  const RunConfig& config() const { return config_; }

  // Registers the calling thread as "main", anchors the device clock, starts the sampler. Outside a step.
  void start();
  // The training loader's stats(), read once at the end of the warm-up: finish() then reports the loader over
  // the measured steps (its workers' busy share without the start-up pause). Before the first step.
  void watch_loader(std::function<LoaderStats()> stats);
  // Resolves pending device timings (one device sync), stops the sampler and assembles the report. `loader`:
  // the training DataLoader's stats (null for InOrderBatches).
  RunReport finish(const LoaderStats* loader = nullptr, std::optional<CommTimes> comm = std::nullopt,
                   std::optional<GraphReport> graphs = std::nullopt);
  // "6368 img/s | GPU 87% | mem 2.1 GiB" for the progress line (only what is measured; img/s is the run's
  // throughput over the steps the device has finished, the figure the report ends with).
  std::string progress_text() const;
  LiveSample live_sample() const;

 private:
  // Adds the end-of-warm-up hook that splits the device memory peak into warm-up and steady state.
  ProfilerOptions with_warmup_hook(ProfilerOptions options);
  // Per-thread CPU over the measured steps (1 Hz samples) or the whole run (start/end snapshots).
  void thread_cpu(RunMeasurements& m, double run_wall_s) const;
  RunConfig config_;
  Device device_;
  Profiler profiler_;
  GpuSampler sampler_;
  bool started_ = false;
  bool finished_ = false;
  double start_s_ = 0.0;
  std::vector<platform::ThreadCpu> start_cpu_;
  int64_t warmup_peak_allocated_ = 0, warmup_peak_reserved_ = 0;
  std::function<LoaderStats()> loader_stats_;
  std::shared_ptr<const LoaderStats> loader_at_warmup_;  // set at the warm-up's end when watched
  bool steady_watermark_ = false;
};

}  // namespace liftoff
