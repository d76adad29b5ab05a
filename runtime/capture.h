// Capture state: whether the calling thread is capturing a CUDA graph, and the interface of everything that
// takes part in a captured training step. It sits at the bottom of the runtime (plain thread-local state, in
// every build) so that low-level CUDA code (streams, events, allocator, RNG) can ask "am I being captured?"
// without depending on the graph policy above it (runtime/graph.h builds on this file).
#pragma once
#include <memory>
#include <vector>

#include "runtime/error.h"

namespace liftoff {

// The captured code did something a graph cannot replay faithfully.
class GraphCaptureError : public Error {
  using Error::Error;
};

// True while the calling thread is capturing a graph.
bool graph_capture_active();
// The device whose compute stream the calling thread captures; -1 when not capturing.
int graph_capture_device();
// Throws GraphCaptureError ("<what> cannot be captured in a CUDA graph ...") while capturing; no-op
// otherwise.
void check_not_capturing(const char* what);

// Marks, on the calling thread, eager work that prepares a capture (the trainer's warm-up steps before it
// captures the step). Code that tunes itself on first use (cuDNN's algorithm searches) then tunes for graph
// replay, where every kernel is a node, rather than for host-launched eager steps, where the host's launch
// cost counts. Nests; `active` false leaves the current state.
class GraphWarmupScope {
 public:
  explicit GraphWarmupScope(bool active);
  ~GraphWarmupScope();
  GraphWarmupScope(const GraphWarmupScope&) = delete;
  GraphWarmupScope& operator=(const GraphWarmupScope&) = delete;

 private:
  bool previous_;
};
bool graph_warmup_active();

// Marks, on the calling thread, work whose shapes run once or rarely (an evaluation's last, smaller batch).
// Code that tunes itself on first use then takes its first guess instead of timing candidates (cuDNN's ranked
// algorithm rather than a search: ResNet-9's evaluation tail paid 65 ms of searches for 6 convolutions run
// once), and the guess is provisional: the shape's first use outside such a scope tunes it. Nests; `active`
// false leaves the current state.
class QuickTuningScope {
 public:
  explicit QuickTuningScope(bool active);
  ~QuickTuningScope();
  QuickTuningScope(const QuickTuningScope&) = delete;
  QuickTuningScope& operator=(const QuickTuningScope&) = delete;

 private:
  bool previous_;
};
bool quick_tuning_active();

// Something whose state takes part in a captured step (DDP's all-reduce rounds, the profiler's marks, the
// GradScaler's stage, the optimizer's gradients, the trainer's own counters). A step runner calls, in order:
// begin_capture() before the capture starts; end_capture() when the captured work is complete, before the
// graph is instantiated; abort_capture() when the capture failed, also after end_capture() when the
// instantiation failed (nothing captured ran on the device: undo the host-side effects of the half-recorded
// step); and around every replay before_replay() (may throw to prevent it) and after_replay().
// `record_events` collects the event-record nodes (cudaEvent_t as void*) a participant's captured code
// recorded, in capture order, and the events to rebind them to at a replay, in the same order.
class CaptureParticipant {
 public:
  virtual ~CaptureParticipant() = default;
  virtual void begin_capture() {}
  virtual void end_capture(std::vector<void*>* record_events) { (void)record_events; }
  virtual void abort_capture() noexcept {}
  virtual void before_replay(std::vector<void*>* record_events) { (void)record_events; }
  virtual void after_replay() {}
};

// Keeps `holder` alive while the graph this thread is capturing exists (no-op when not capturing): for memory
// a captured kernel reads or writes that nothing else ties to the graph (autocast's batched weight casts
// reach the caches of modules the captured code may never touch, which may be destroyed while it replays).
void retain_for_captured_graph(std::shared_ptr<const void> holder);

namespace detail {
// Set by CudaGraph (runtime/graph.cpp) around a capture on the calling thread.
void set_capture_state(bool capturing, int device);
// Where retain_for_captured_graph() puts its holders (the graph's own list; null when not capturing).
void set_capture_retainer(std::vector<std::shared_ptr<const void>>* retained);
}  // namespace detail

}  // namespace liftoff
