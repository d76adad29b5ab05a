// The figures a verdict weighs, computed once from a RunReport: the step's shares (data wait, copies,
// exposed all-reduce, host compute), the GPU's busy fraction and where it came from, how busy the loader
// workers were, and whether the device runs behind the host and why. The rules (rules.h) read these instead
// of recomputing them from the stage table.
//
// A figure that was not measured has its has_ flag false (or an empty optional) and is never compared or
// printed; the *_text fields are the evidence phrases naming the figure and its source.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "models/report/run_report.h"

namespace liftoff {

struct VerdictFacts {
  bool measured = false;  // a step was measured (steps_measured > 0 and a positive mean step time)
  // Too little evidence for a verdict: fewer than min_steps measured steps covering less than
  // min_measured_s (a smoke test, or a run no longer than its warm-up); thin_text: "N steps, M samples".
  bool too_short = false;
  std::string thin_text;
  bool cuda = false;      // the run's device is a GPU
  double wall_ms = 0.0;   // mean step wall time, the denominator of every share
  std::string step_text;  // "step 20.00 ms"

  // GPU busy fraction: CUDA events first (they time only our work), NVML when lower or the only source.
  std::optional<double> busy;
  std::string busy_text;  // how it was measured; "" on a CPU run without a figure

  // data_wait per step: the training thread's wait, or the compute stream's wait for the batch's GPU
  // decode (the loader's events) when longer (device_wait).
  double wait_ms = 0.0;
  double wait_share = 0.0;
  bool device_wait = false;

  // H2D copies: the copy stream's time, or the training thread's when longer (issuing from pageable memory,
  // the thread itself copies through the driver's staging buffer).
  bool has_h2d = false;
  bool host_copy = false;
  double h2d_ms = 0.0;
  double h2d_share = 0.0;

  // GPU decoding (--decode gpu, or the CPU + GPU hybrid): the decode streams' time per batch. The loader
  // reports it in the h2d row, but it is nvJPEG's work next to the model on the same GPU, not a copy.
  std::optional<double> gpu_decode_ms;

  // Exposed all-reduce: the device figure, or the host wait on CPU (MPI) runs.
  bool has_comm = false;
  double comm_ms = 0.0;
  double comm_share = 0.0;

  // Loader workers' busy fraction: the loader's busy time when present, else the CPU time of loader-*
  // threads.
  std::optional<double> workers_busy;
  std::string workers_text;

  // forward + backward + optimizer host time (compute on a CPU run, issue time on a CUDA run).
  double compute_ms = 0.0;
  double compute_share = 0.0;
  double other_share = 0.0;  // work outside the timed stages
  std::string shares_text;   // "data wait 5%, H2D copies 3% of the step 20.00 ms"

  // The device finishing steps more than a step's time after the host issued them is behind the host.
  bool device_behind = false;
  bool inside_marks = false;  // our device marks cover at least gpu_busy of the step
  bool sms_idle = false;      // NVML (with enough samples) found the SMs nearly idle
  bool nvml_busy = false;     // NVML (with enough samples) found the SMs busy (>= gpu_busy)
  // The device finished each step less than keeps_up_share of a step after the host issued it: it drained
  // the host's launches as they came and idled between them (our stage spans include those gaps).
  bool host_paced = false;
  double node_floor_ms = 0.0;      // a captured graph's nodes at the least a node costs (one stream's path)
  bool many_nodes = false;         // ... take at least latency_share of the step
  bool latency_bound = false;      // behind inside our marks, kernels too small to fill the device
  bool back_pressure = false;      // behind inside our marks, doing real work: a data wait is back-pressure
  bool workers_saturated = false;  // the workers were busy >= workers_saturated of the measured steps
};

// The loader decodes images on the GPU (nvJPEG): --decode gpu, or the hybrid.
bool gpu_decoding(const RunConfig& config);

// Thresholds enter where a fact is a judgement (enough NVML samples, marks covering the step, tiny kernels).
VerdictFacts compute_facts(const RunReport& report, const VerdictThresholds& thresholds = {});

}  // namespace liftoff
