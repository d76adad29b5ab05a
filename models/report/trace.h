// --trace run.trace.json: Chrome trace events (Perfetto / chrome://tracing), schema liftoff.trace/1
// (docs/report-schema.md).
#pragma once
#include <string>

#include "models/report/run_report.h"
#include "runtime/profile/gpu_sampler.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

// "X" spans per stage per step on the training thread, loader worker spans, device streams; counters for
// NVML and thread CPU. Throws IOError.
void write_trace(const std::string& path, const Profiler& profiler, const GpuSampler* sampler,
                 const RunConfig& config);

}  // namespace liftoff
