#include "models/report/trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>

#include "runtime/error.h"
#include "runtime/platform/cpu_usage.h"

namespace liftoff {

namespace {

using json = nlohmann::ordered_json;

constexpr int kHostPid = 1;
constexpr int kDevicePid = 2;

json thread_name_event(int pid, int64_t tid, const std::string& name) {
  return {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Host and device spans, then the names of the device streams and of the host threads.
void span_events(const Profiler& profiler, const std::function<double(double)>& us, json& events) {
  std::map<int64_t, std::string> thread_names;
  for (const platform::ThreadCpu& t : platform::registered_thread_cpu()) thread_names[t.tid] = t.name;
  thread_names[profiler.main_thread_id()] = "main";
  for (const TraceSpan& s : profiler.trace_spans()) {
    const int64_t tid = s.device ? -1 - s.tid : s.tid;  // device streams: tid 0 compute, 1 copy, 2 comm
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
        thread_name_event(kDevicePid, k, std::string(stream_name(static_cast<StreamKind>(k))) + " stream"));
  }
  for (const auto& [tid, name] : thread_names) events.push_back(thread_name_event(kHostPid, tid, name));
}

json counter(const char* name, int pid, double ts, json args) {
  return {{"name", name}, {"ph", "C"}, {"pid", pid}, {"ts", ts}, {"args", std::move(args)}};
}

// NVML samples, and each thread's CPU % between consecutive samples.
void counter_events(const GpuSampler& sampler, const std::function<double(double)>& us, json& events) {
  for (const TimedGpuSample& s : sampler.gpu_samples()) {
    if (!s.sample.valid) continue;
    events.push_back(counter("GPU utilization %", kDevicePid, us(s.t), {{"util", s.sample.utilization_gpu}}));
    events.push_back(counter("GPU memory used MiB", kDevicePid, us(s.t),
                             {{"used", static_cast<double>(s.sample.memory_used) / (1024.0 * 1024.0)}}));
    events.push_back(counter("GPU power W", kDevicePid, us(s.t), {{"power", s.sample.power_mw / 1000.0}}));
  }
  const std::vector<TimedThreadCpu> cpu = sampler.cpu_samples();
  for (size_t i = 1; i < cpu.size(); ++i) {
    const double dt = cpu[i].t - cpu[i - 1].t;
    if (dt <= 0) continue;
    json args = json::object();
    for (const platform::ThreadCpu& t : cpu[i].threads) {
      for (const platform::ThreadCpu& p : cpu[i - 1].threads) {
        if (p.tid == t.tid && p.name == t.name) args[t.name] = 100.0 * (t.cpu_seconds - p.cpu_seconds) / dt;
      }
    }
    if (!args.empty()) events.push_back(counter("thread CPU %", kHostPid, us(cpu[i].t), args));
  }
}

}  // namespace

void write_trace(const std::string& path, const Profiler& profiler, const GpuSampler* sampler,
                 const RunConfig& config) {
  const double origin = profiler.origin_s();
  const std::function<double(double)> us = [origin](double s) { return (s - origin) * 1e6; };
  json events = json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", kHostPid}, {"tid", 0}, {"args", {{"name", "host"}}}});
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kDevicePid},
                    {"tid", 0},
                    {"args", {{"name", "device " + config.device}}}});
  span_events(profiler, us, events);
  if (sampler != nullptr) counter_events(*sampler, us, events);
  json root = {{"traceEvents", events},
               {"displayTimeUnit", "ms"},
               {"otherData", {{"schema", kTraceSchema}, {"device", config.device}, {"model", config.model}}}};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IOError("cannot write the trace to '" + path + "'");
  out << root.dump() << "\n";
  out.flush();
  if (!out) throw IOError("writing the trace to '" + path + "' failed");
}

}  // namespace liftoff
