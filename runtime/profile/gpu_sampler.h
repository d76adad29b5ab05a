// A background thread that samples the GPU through NVML (utilization, memory, SM clock, power) at ~10 Hz
// and the CPU time of the registered threads (runtime/platform/cpu_usage.h) at ~1 Hz, into bounded buffers.
// Without NVML (no driver) or on a CPU device the GPU side is "not available" with the reason, never an
// error; the CPU side still runs.
//
// Times are seconds on std::chrono::steady_clock (time_since_epoch), the clock the Profiler uses, so that
// summaries can be restricted to the intervals the training steps ran in.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "runtime/profile/nvml.h"
#include "runtime/platform/cpu_usage.h"

namespace liftoff {

struct GpuSamplerOptions {
  double interval_s = 0.1;      // NVML sampling period
  double cpu_interval_s = 1.0;  // thread CPU sampling period (/proc counts in 10 ms ticks: finer is noise)
  // Buffer bound: when full, every other sample is dropped and the period doubles (aggregates stay exact
  // over what is kept; long runs keep an evenly thinned history).
  size_t max_samples = 36000;
  size_t max_cpu_samples = 7200;
};

struct TimedGpuSample {
  double t = 0.0;  // steady_clock seconds
  GpuSample sample;
};

struct TimedThreadCpu {
  double t = 0.0;
  std::vector<platform::ThreadCpu> threads;
};

// Aggregates over the samples taken inside the given time windows (all samples when none are given).
struct GpuUtilization {
  bool available = false;  // NVML sampled this device
  std::string reason;      // why not, when !available
  int nvml_index = -1;
  int64_t samples = 0;  // valid samples aggregated
  double util_mean_pct = 0.0;
  double util_max_pct = 0.0;
  double mem_util_mean_pct = 0.0;  // share of time device memory was read or written
  uint64_t memory_used_max = 0;    // bytes, whole device (all processes)
  uint64_t memory_total = 0;
  double sm_clock_mean_mhz = 0.0;
  double power_mean_w = 0.0;
};

class GpuSampler {
 public:
  // device: the training device (a CPU device samples only thread CPU time).
  explicit GpuSampler(Device device, GpuSamplerOptions options = {});
  ~GpuSampler();  // stops the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  void start();  // starts the sampler thread (idempotent)
  void stop();   // takes a last sample and joins (idempotent)

  bool available() const { return nvml_index_ >= 0; }
  const std::string& unavailable_reason() const { return reason_; }
  int nvml_index() const { return nvml_index_; }

  using Window = std::pair<double, double>;  // [begin, end] steady_clock seconds
  GpuUtilization summary(const std::vector<Window>& windows = {}) const;
  std::vector<TimedGpuSample> gpu_samples() const;
  // The most recent NVML sample (for a progress line); none before the first one or without NVML.
  std::optional<TimedGpuSample> latest() const;
  std::vector<TimedThreadCpu> cpu_samples() const;

 private:
  void loop();
  void take_gpu_sample(double now);
  void take_cpu_sample(double now);

  Device device_;
  GpuSamplerOptions options_;
  int nvml_index_ = -1;
  std::string reason_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool running_ = false;
  std::thread thread_;
  double gpu_period_;
  double cpu_period_;
  std::vector<TimedGpuSample> gpu_;
  std::vector<TimedThreadCpu> cpu_;
};

}  // namespace liftoff
