// Profiler: per-stage timing of a training run, one per run, used from the training thread.
//
// Host stages are timed with steady_clock by StageScope (RAII). Device stages are bracketed by
// begin_device_stage / end_device_stage, which record device events (runtime/stream.h, recycled from a
// pool) on the stream that does the work. Events are never waited for inside a step: a step's events are
// first queried `lag` steps after it ended (cudaEventQuery, non-blocking) and retried each later step until
// complete; finish() does one device synchronisation and resolves the rest. On a CPU device (or a build
// without CUDA) device stages are no-ops and every figure is a host figure.
//
// A step is what the caller brackets with begin_step / end_step (the Trainer: one optimizer step, i.e.
// `accum` micro-batches). "other" = step wall time - the sum of the host stages, so the host stages and
// "other" add up to the step wall time by construction; host stages must therefore not nest.
//
// Device busy share: the union, over the measured steps, of the intervals between begin and end marks of all
// device stages, divided by the wall time of those steps. It says how much of the wall time the marked
// streams had our work between a stage's begin and end marks. It includes bubbles inside a stage (a kernel
// waiting for the host to launch the next one), so it is an upper bound of kernel-busy time; work not
// bracketed by marks (e.g. the loader's own kernels) is not in it.
//
// Throughput (runtime/profile/throughput.h): images over the device's wall time on the steps, from an end
// event per step that is never dropped (a step whose stage marks are dropped still has its end timed).
//
// Device lag: when the step's end mark completed on the device minus when end_step ran on the host (device
// timestamps mapped onto steady_clock through an event synchronised once in set_device). Large: the host is
// ahead and the device is the bottleneck; near zero: the device drains its queue as fast as the host fills
// it (starved by the host).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/capture.h"
#include "runtime/device.h"
#include "runtime/profile/throughput.h"
#include "runtime/stream.h"  // StreamKind

namespace liftoff {

enum class Stage : uint8_t { data_wait, h2d, augment, forward, backward, allreduce, optimizer, other };
constexpr int kNumStages = 8;
const char* stage_name(Stage stage);
// Inverse of stage_name; nullopt for an unknown name.
std::optional<Stage> stage_from_name(const std::string& name);

struct ProfilerOptions {
  int lag = 3;                  // steps between a step's end and the first query of its events (>= 0)
  int64_t warmup_steps = 5;     // first steps left out of the summary (autotuning, allocator warm-up)
  int max_marks_per_step = 64;  // device marks (and host spans for the trace) per step; more are dropped
  int ring_slack = 16;      // steps beyond `lag` a step's device timing may stay pending before it is dropped
  bool keep_trace = false;  // keep every span for the trace file (memory grows with the run)
  int64_t trace_max_steps = 20000;  // stop keeping spans after this many steps
  // Called once, at the end of the last warm-up step (e.g. to start a steady-state memory watermark).
  std::function<void()> on_warmup_end;
};

// One interval for the trace. Times are steady_clock seconds (time_since_epoch).
struct TraceSpan {
  const char* name = "";  // a stage name or a caller's string literal
  int64_t step = -1;      // -1: not inside a step (e.g. a loader worker's span)
  double begin_s = 0.0;
  double end_s = 0.0;
  int64_t tid = 0;  // host: the thread's kernel id; device: -1 - StreamKind
  bool device = false;
};

// Sums over a set of steps. Host figures cover every step in the set; device figures only the steps whose
// device marks were resolved (device_steps of them).
struct ProfileTotals {
  int64_t steps = 0;
  int64_t images = 0;
  double wall_ms = 0.0;
  double wall_ms_min = 0.0;
  double wall_ms_max = 0.0;
  double wall_ms_sq = 0.0;                   // sum of squares, for the standard deviation
  std::array<double, kNumStages> host_ms{};  // [other] = wall - sum of the others (clamped at 0 per step)
  std::array<int64_t, kNumStages> host_calls{};
  int64_t device_steps = 0;
  double device_wall_ms = 0.0;  // host wall time of those steps
  std::array<double, kNumStages> device_ms{};
  std::array<int64_t, kNumStages> device_marks{};
  double device_busy_ms = 0.0;           // union of the marked intervals
  double allreduce_overlapped_ms = 0.0;  // comm-stream allreduce time overlapping compute-stream marks
  double device_lag_ms = 0.0;            // sum over device_steps
};

struct ProfileSummary {
  int64_t steps_total = 0;         // end_step calls
  int64_t warmup_excluded = 0;     // steps left out (0 when the run had no more steps than the warm-up)
  ProfileTotals totals;            // the measured steps
  double all_steps_wall_ms = 0.0;  // wall time of every step, warm-up included
  int64_t all_steps_images = 0;
  bool device_timing = false;        // device marks were recorded (CUDA device)
  int64_t device_steps_dropped = 0;  // steps whose device timing was lost (ring full, too many marks)
  int64_t marks_dropped = 0;
  int64_t trace_spans_dropped = 0;  // host spans beyond max_marks_per_step (left out of the trace only)
  // Merged steady_clock windows of the measured steps (to restrict NVML averages to training time).
  std::vector<std::pair<double, double>> windows;
  // The run's throughput (measured steps, or the warm-up's when there are none); complete after finish().
  ThroughputFigures throughput;
};

class Profiler : public CaptureParticipant {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // The device the steps run on. For CUDA this synchronises the device once (to anchor device timestamps
  // on the host clock): call it before training, never inside a step. Default: the CPU.
  void set_device(Device device);
  Device device() const { return device_; }
  const ProfilerOptions& options() const { return options_; }

  // Opens a step (no-op when one is open: callers may call it before every micro-batch).
  void begin_step();
  // Closes the open step with the number of images it trained on; resolves older steps' device marks that
  // have completed (non-blocking).
  void end_step(int64_t images);
  // Discards the open step (e.g. the final data wait of an epoch that found no batch).
  void abandon_step();
  bool in_step() const { return in_step_; }

  // Host stage timing; not nested, on the thread that calls begin_step.
  void begin_host_stage(Stage stage);
  void end_host_stage(Stage stage);

  // Device stage marks on the device's stream of that kind (no-ops on a CPU device). Must be inside a step.
  void begin_device_stage(Stage stage, StreamKind stream = StreamKind::compute);
  void end_device_stage(Stage stage, StreamKind stream = StreamKind::compute);
  // Forgets an open device mark without recording its end (never throws).
  void cancel_device_stage(Stage stage, StreamKind stream) noexcept;

  // A participant of captured steps (runtime/capture.h). Between begin_capture and end_capture, device marks
  // become event-record nodes of the graph being captured on the compute stream, and the mark calls are kept.
  // end_capture appends the events recorded, in order (for CudaGraph::end_capture); the capture's first
  // launch records them, so that step is timed like any other. before_replay issues the kept calls again for
  // the open step without recording anything and appends one fresh event per node (for CudaGraph::replay),
  // so every replay is timed on its own events. abort_capture drops the kept calls. Nothing on a CPU device.
  void begin_capture() override;
  void end_capture(std::vector<void*>* record_events) override;
  void abort_capture() noexcept override;
  void before_replay(std::vector<void*>* record_events) override;

  // Thread-safe: a span on the calling thread (e.g. a loader worker filling a batch), for the trace only.
  // `name` must outlive the profiler (a string literal).
  void record_thread_span(const char* name, std::chrono::steady_clock::time_point begin,
                          std::chrono::steady_clock::time_point end);

  // Synchronises the device and resolves every pending step. Call at the end of the run (outside a step).
  void finish();

  ProfileSummary summary() const;
  // The run's throughput over the steps the device has finished so far (the figure the report ends with once
  // finish() has run): what a progress line shows.
  ThroughputFigures throughput() const { return throughput_.figures(); }
  // Spans kept for the trace (empty unless options.keep_trace), and the wall-time origin of the run.
  std::vector<TraceSpan> trace_spans() const;
  double origin_s() const { return origin_s_; }
  int64_t main_thread_id() const { return main_tid_; }

  // RAII host stage: StageScope s(profiler, Stage::forward). A null profiler makes it a no-op.
  class StageScope {
   public:
    StageScope(Profiler* profiler, Stage stage) : profiler_(profiler), stage_(stage) {
      if (profiler_) profiler_->begin_host_stage(stage_);
    }
    ~StageScope() {
      if (profiler_) profiler_->close_host_stage(stage_);
    }
    StageScope(const StageScope&) = delete;
    StageScope& operator=(const StageScope&) = delete;

   private:
    Profiler* profiler_;
    Stage stage_;
  };

  // RAII device stage (begin/end marks on one stream); a null profiler makes it a no-op.
  class DeviceScope {
   public:
    DeviceScope(Profiler* profiler, Stage stage, StreamKind stream = StreamKind::compute)
        : profiler_(profiler), stage_(stage), stream_(stream), uncaught_(std::uncaught_exceptions()) {
      if (profiler_) profiler_->begin_device_stage(stage_, stream_);
    }
    // Unwinding from an exception (e.g. an OOM in forward) drops the mark instead of recording it, so the
    // destructor never throws then.
    ~DeviceScope() noexcept(false) {
      if (!profiler_) return;
      if (std::uncaught_exceptions() > uncaught_) {
        profiler_->cancel_device_stage(stage_, stream_);
      } else {
        profiler_->end_device_stage(stage_, stream_);
      }
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

   private:
    Profiler* profiler_;
    Stage stage_;
    StreamKind stream_;
    int uncaught_;
  };

  struct DeviceState;  // CUDA events and the pending ring (defined in profiler.cpp)

 private:
  void close_host_stage(Stage stage) noexcept;  // StageScope's end: never throws
  static void add_window(std::vector<std::pair<double, double>>& windows, double begin_s, double end_s);
  // Resolves the oldest pending step's device marks; false when they have not completed (wait: block).
  bool resolve_oldest(bool wait);
  // Times the pending step ends the device has passed (all of them, waiting, when `wait`).
  void resolve_step_ends(bool wait);
  bool keeps_trace_for(int64_t step) const;

  ProfilerOptions options_;
  Device device_ = Device::cpu();
  double origin_s_ = 0.0;
  int64_t main_tid_ = 0;

  bool in_step_ = false;
  int64_t step_ = 0;  // index of the open (or next) step
  double step_begin_s_ = 0.0;
  std::array<double, kNumStages> step_host_ms_{};
  std::array<int64_t, kNumStages> step_host_calls_{};
  int open_host_stage_ = -1;
  double host_stage_begin_s_ = 0.0;
  // Host spans of the open step for the trace (fixed capacity: no allocation per step).
  std::vector<TraceSpan> step_spans_;
  size_t step_span_count_ = 0;

  ProfileTotals warmup_, measured_;
  int64_t steps_total_ = 0;
  int64_t device_steps_dropped_ = 0;
  int64_t marks_dropped_ = 0;
  int64_t trace_spans_dropped_ = 0;
  std::vector<std::pair<double, double>> windows_, warmup_windows_;
  ThroughputMeter throughput_;

  std::unique_ptr<DeviceState> dev_;
  struct GraphMarkCall {
    Stage stage;
    StreamKind stream;
    bool begin;
  };
  std::vector<GraphMarkCall> graph_calls_;  // the device-mark calls of the last captured graph
  bool graph_marks_dropped_ = false;        // the capture dropped marks: its replays' figures are partial

  mutable std::mutex trace_mutex_;  // trace_ is also appended to by other threads
  std::vector<TraceSpan> trace_;
  friend struct DeviceState;
};

}  // namespace liftoff
