#include "runtime/profile/gpu_sampler.h"

#include <algorithm>
#include <chrono>

#include "runtime/config.h"
#include "runtime/platform/thread_name.h"

#if LIFTOFF_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/check.h"
#endif

namespace liftoff {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Keeps every other element: the buffer stays bounded and evenly spread over the run.
template <class T>
void thin(std::vector<T>& v) {
  size_t out = 0;
  for (size_t i = 0; i < v.size(); i += 2) v[out++] = std::move(v[i]);
  v.resize(out);
}

bool in_windows(double t, const std::vector<GpuSampler::Window>& windows) {
  if (windows.empty()) return true;
  for (const auto& w : windows) {
    if (t >= w.first && t <= w.second) return true;
  }
  return false;
}

}  // namespace

namespace {
// LIFTOFF_NVML_INTERVAL_S overrides the NVML period (measuring the sampler's own cost; see docs/perf.md).
double nvml_period(double configured) {
  return config::get_double(config::Knob::nvml_interval_s).value_or(configured);
}
}  // namespace

GpuSampler::GpuSampler(Device device, GpuSamplerOptions options)
    : device_(device),
      options_(options),
      gpu_period_(std::max(nvml_period(options.interval_s), 0.001)),
      cpu_period_(std::max(options.cpu_interval_s, 0.001)) {
  if (!device.is_cuda()) {
    reason_ = "the device is the CPU";
    return;
  }
  Nvml& nvml = Nvml::get();
  if (!nvml.available()) {
    reason_ = nvml.unavailable_reason();
    return;
  }
#if LIFTOFF_WITH_CUDA
  // CUDA ordinals and NVML indices differ (CUDA_VISIBLE_DEVICES, ordering): match the devices by PCI bus id.
  char bus_id[64] = {0};
  LIFTOFF_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof bus_id), device.index));
  nvml_index_ = nvml.index_by_pci_bus_id(bus_id);
  if (nvml_index_ < 0) reason_ = std::string("NVML does not list the device at PCI bus id ") + bus_id;
#else
  reason_ = "built without CUDA";
#endif
}

GpuSampler::~GpuSampler() {
  stop();
}

void GpuSampler::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return;
  stop_requested_ = false;
  running_ = true;
  thread_ = std::thread([this] {
    platform::set_current_thread_name("lo-sampler");
    loop();
  });
}

void GpuSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_) return;
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
}

void GpuSampler::take_gpu_sample(double now) {
  const GpuSample s = Nvml::get().sample(static_cast<unsigned>(nvml_index_));
  std::lock_guard<std::mutex> lock(mutex_);
  gpu_.push_back(TimedGpuSample{now, s});
  if (gpu_.size() >= options_.max_samples) {
    thin(gpu_);
    gpu_period_ *= 2;
  }
}

void GpuSampler::take_cpu_sample(double now) {
  TimedThreadCpu tick{now, platform::registered_thread_cpu()};
  std::lock_guard<std::mutex> lock(mutex_);
  cpu_.push_back(std::move(tick));
  if (cpu_.size() >= options_.max_cpu_samples) {
    thin(cpu_);
    cpu_period_ *= 2;
  }
}

void GpuSampler::loop() {
  platform::register_current_thread("gpu-sampler");
  double next_gpu = now_seconds();
  double next_cpu = next_gpu;
  while (true) {
    const double now = now_seconds();
    if (nvml_index_ >= 0 && now >= next_gpu) {
      take_gpu_sample(now);
      next_gpu = now + gpu_period_;
    }
    if (now >= next_cpu) {
      take_cpu_sample(now);
      next_cpu = now + cpu_period_;
    }
    const double wake = nvml_index_ >= 0 ? std::min(next_gpu, next_cpu) : next_cpu;
    std::unique_lock<std::mutex> lock(mutex_);
    const auto wait = std::chrono::duration<double>(std::max(0.0, wake - now_seconds()));
    if (cv_.wait_for(lock, wait, [this] { return stop_requested_; })) break;
  }
  // A last sample so that short runs (shorter than one period) still have the end state.
  const double now = now_seconds();
  if (nvml_index_ >= 0) take_gpu_sample(now);
  take_cpu_sample(now);
  platform::unregister_current_thread();
}

GpuUtilization GpuSampler::summary(const std::vector<Window>& windows) const {
  GpuUtilization u;
  u.available = nvml_index_ >= 0;
  u.reason = reason_;
  u.nvml_index = nvml_index_;
  std::lock_guard<std::mutex> lock(mutex_);
  double util = 0, mem_util = 0, clock = 0, power = 0;
  for (const TimedGpuSample& ts : gpu_) {
    const GpuSample& s = ts.sample;
    if (!s.valid || !in_windows(ts.t, windows)) continue;
    ++u.samples;
    util += s.utilization_gpu;
    mem_util += s.utilization_memory;
    clock += s.sm_clock_mhz;
    power += s.power_mw;
    u.util_max_pct = std::max(u.util_max_pct, static_cast<double>(s.utilization_gpu));
    u.memory_used_max = std::max(u.memory_used_max, s.memory_used);
    u.memory_total = std::max(u.memory_total, s.memory_total);
  }
  if (u.samples > 0) {
    const double n = static_cast<double>(u.samples);
    u.util_mean_pct = util / n;
    u.mem_util_mean_pct = mem_util / n;
    u.sm_clock_mean_mhz = clock / n;
    u.power_mean_w = power / n / 1000.0;
  } else if (u.available) {
    u.reason = "no NVML sample fell inside the measured steps (run shorter than the sampling period?)";
  }
  return u;
}

std::vector<TimedGpuSample> GpuSampler::gpu_samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gpu_;
}

std::optional<TimedGpuSample> GpuSampler::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (gpu_.empty()) return std::nullopt;
  return gpu_.back();
}

std::vector<TimedThreadCpu> GpuSampler::cpu_samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cpu_;
}

}  // namespace liftoff
