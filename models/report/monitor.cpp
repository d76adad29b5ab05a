#include "models/report/monitor.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "data/loader.h"
#include "models/report/format.h"
#include "runtime/error.h"

#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct SampledCpu {
  std::map<int64_t, std::pair<double, double>> per_thread;  // tid -> (cpu s, wall s)
  double wall_s = 0.0;                                      // step time the samples cover
};

// CPU time per thread between consecutive 1 Hz samples that both fall inside measured steps.
SampledCpu sampled_cpu(const std::vector<TimedThreadCpu>& samples,
                       const std::vector<std::pair<double, double>>& windows) {
  auto inside = [&](double t) {
    for (const auto& w : windows) {
      if (t >= w.first && t <= w.second) return true;
    }
    return false;
  };
  SampledCpu out;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (!inside(samples[i - 1].t) || !inside(samples[i].t)) continue;
    const double dt = samples[i].t - samples[i - 1].t;
    out.wall_s += dt;
    for (const platform::ThreadCpu& t : samples[i].threads) {
      for (const platform::ThreadCpu& p : samples[i - 1].threads) {
        if (p.tid != t.tid || p.name != t.name) continue;
        auto& acc = out.per_thread[t.tid];
        acc.first += t.cpu_seconds - p.cpu_seconds;
        acc.second += dt;
      }
    }
  }
  return out;
}

}  // namespace

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
    if (loader_stats_) loader_at_warmup_ = std::make_shared<const LoaderStats>(loader_stats_());
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

void RunMonitor::watch_loader(std::function<LoaderStats()> stats) {
  loader_stats_ = std::move(stats);
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

void RunMonitor::thread_cpu(RunMeasurements& m, double run_wall_s) const {
  const std::vector<platform::ThreadCpu> end_cpu = platform::registered_thread_cpu();
  const SampledCpu sampled = sampled_cpu(sampler_.cpu_samples(), m.profile.windows);
  // Sampled figures need at least 2 s of covered step time (1 Hz samples, 10 ms /proc ticks).
  const bool use_samples = sampled.wall_s >= 2.0;
  m.cpu_source = use_samples ? "sampled" : "run";
  for (const platform::ThreadCpu& t : end_cpu) {
    if (t.name == "gpu-sampler") continue;
    ThreadCpuReport tr;
    tr.name = t.name;
    tr.tid = t.tid;
    if (use_samples) {
      const auto it = sampled.per_thread.find(t.tid);
      if (it == sampled.per_thread.end() || it->second.second <= 0) continue;
      tr.cpu_seconds = it->second.first;
      tr.busy_pct = 100.0 * it->second.first / it->second.second;
    } else {
      double before = 0.0;
      for (const platform::ThreadCpu& s : start_cpu_) {
        if (s.tid == t.tid && s.name == t.name) before = s.cpu_seconds;
      }
      tr.cpu_seconds = std::max(0.0, t.cpu_seconds - before);
      if (run_wall_s > 0) tr.busy_pct = 100.0 * tr.cpu_seconds / run_wall_s;
    }
    m.threads.push_back(std::move(tr));
  }
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
  if (loader != nullptr) {
    // Over the measured steps when the warm-up's end was seen (see watch_loader), else over every step. The
    // busy shares divide by the steps' wall time (not the wall clock since then: evaluations and checkpoints
    // in between would dilute them), so workers that also decode between steps can pass 100%.
    if (loader_at_warmup_ && m.profile.warmup_excluded > 0 && m.profile.totals.wall_ms > 0) {
      m.loader =
          loader_report(loader_stats_since(*loader, *loader_at_warmup_), m.profile.totals.wall_ms * 1e-3);
      m.loader->measured_steps_only = true;
    } else {
      m.loader = loader_report(*loader, m.profile.all_steps_wall_ms * 1e-3);
    }
  }
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
  thread_cpu(m, end_s - start_s_);
  return build_report(config_, m);
}

LiveSample RunMonitor::live_sample() const {
  LiveSample s;
  if (const auto g = sampler_.latest(); g && g->sample.valid) s.gpu_util_pct = g->sample.utilization_gpu;
#if LIFTOFF_WITH_CUDA
  if (device_.is_cuda()) {
    s.device_memory = static_cast<int64_t>(cuda::CachingAllocator::get().stats(device_.index).allocated);
  }
#endif
  if (const int64_t rss = platform::current_rss_bytes(); rss >= 0) s.host_rss = rss;
  return s;
}

std::string RunMonitor::progress_text() const {
  // The report's figure over the steps the device has finished so far (never the host's queueing rate).
  const ThroughputFigures t = profiler_.throughput();
  std::string text =
      t.steps > 0 ? report_format::fmt("%.0f", t.images_per_second()) + " img/s" : "img/s pending";
  const LiveSample s = live_sample();
  if (s.gpu_util_pct) text += " | GPU " + report_format::fmt("%.0f", *s.gpu_util_pct) + "%";
  if (s.device_memory) {
    text += " | mem " + format_bytes(*s.device_memory);
  } else if (s.host_rss) {
    text += " | RSS " + format_bytes(*s.host_rss);
  }
  return text;
}

}  // namespace liftoff
