// Internal to runtime/profile/profiler.cpp (its only includer): the device side of the Profiler, the CUDA
// timing events and the ring of steps whose marks are not resolved yet.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <vector>

#include "runtime/profile/profiler.h"
#include "runtime/stream.h"

namespace liftoff {

namespace profile_detail {
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace profile_detail

struct Profiler::DeviceState {
  struct Mark {
    Stage stage;
    StreamKind stream;
    int begin;
    int end;
  };
  struct Slot {
    int64_t step = -1;
    bool measured = false;
    bool incomplete = false;  // a mark was dropped: the step's device figures would be wrong
    double begin_s = 0.0;
    double end_s = 0.0;
    int end_event = -1;  // step end, on the compute stream
    std::vector<Mark> marks;
    std::array<int, kNumStreams> last_end{};  // latest end event per stream (events complete in order)
  };
  struct Interval {
    double begin;
    double end;
    StreamKind stream;
    bool allreduce;
  };

  // A step's end for the throughput: never dropped, resolved in step order.
  struct StepEnd {
    double begin_s;
    int64_t images;
    bool measured;
    int event;
  };

  // How a mark's event is recorded: now (eager steps), as a node of the graph being captured, or not at all
  // (a replay: the graph's node records it).
  enum class MarkMode { record, capture, defer };

  Device device;
  // The compute stream is resolved at each record: marks go where the compute work goes, a concurrent
  // branch's lane (runtime/branches.h). Copy and comm streams are fixed.
  std::array<Stream, kNumStreams> streams;
  std::vector<Event> events;  // timing events, recycled through free_events
  MarkMode mode = MarkMode::record;
  std::vector<void*> mode_events;  // events captured or deferred since the mode was set
  int sink = -1;                   // bound to graph nodes whose mark was dropped; never read
  std::vector<int> free_events;
  int anchor = -1;        // a completed event whose time on the host clock is known
  double anchor_s = 0.0;  // that time
  // The step ends chain their own anchor (the last one timed), so they are always timed forward from it.
  std::deque<StepEnd> ends;
  int ends_anchor = -1;
  double ends_anchor_s = 0.0;
  double busy_cursor_s = -1e300;
  std::vector<Slot> ring;
  size_t head = 0;   // oldest pending slot
  size_t count = 0;  // pending slots, the open step's included
  std::array<int, kNumStages * kNumStreams> open{};
  std::vector<Interval> scratch;
  std::vector<std::pair<double, double>> compute_merged;

  DeviceState(Device on, const ProfilerOptions& options) : device(on) {
    streams = {Stream::of(device, StreamKind::compute), Stream::of(device, StreamKind::copy),
               Stream::of(device, StreamKind::comm)};
    ring.resize(static_cast<size_t>(std::max(options.lag, 0) + std::max(options.ring_slack, 1) + 1));
    for (Slot& s : ring) s.marks.reserve(static_cast<size_t>(options.max_marks_per_step));
    scratch.reserve(static_cast<size_t>(options.max_marks_per_step));
    compute_merged.reserve(static_cast<size_t>(options.max_marks_per_step));
    open.fill(-1);
    synchronize(device);
    anchor = anchored_event(&anchor_s);
    ends_anchor = anchored_event(&ends_anchor_s);
  }

  // Anchors device time on the host clock: with the device idle, the event completes as soon as it is
  // recorded, so its host time is known to within the record + synchronize round trip.
  int anchored_event(double* host_s) {
    const int i = take();
    Event& e = events[static_cast<size_t>(i)];
    const double t0 = profile_detail::now_s();
    e.record(streams[0]);
    e.synchronize();
    *host_s = 0.5 * (t0 + profile_detail::now_s());
    return i;
  }

  int take() {
    if (!free_events.empty()) {
      const int i = free_events.back();
      free_events.pop_back();
      return i;
    }
    // The pool grows during the first steps only; later steps reuse resolved events.
    events.emplace_back(device, /*timing=*/true);
    free_events.reserve(events.capacity());
    return static_cast<int>(events.size()) - 1;
  }

  void give(int i) {
    if (i >= 0) free_events.push_back(i);
  }

  void record(int i, StreamKind stream) {
    Event& e = events[static_cast<size_t>(i)];
    const Stream& s = streams[static_cast<size_t>(stream)];
    switch (mode) {
      case MarkMode::record:
        e.record(s);
        break;
      case MarkMode::capture:
        e.record_node(s);
        mode_events.push_back(e.native());
        break;
      case MarkMode::defer:
        mode_events.push_back(e.record_by_graph());
        break;
    }
  }

  // Non-blocking: true when the event's work is done.
  bool done(int i) const { return i < 0 || events[static_cast<size_t>(i)].query(); }

  double elapsed_ms(int from, int to) const {
    return Event::elapsed_ms(events[static_cast<size_t>(from)], events[static_cast<size_t>(to)]);
  }

  Slot& slot_at(size_t k) { return ring[(head + k) % ring.size()]; }

  void recycle(Slot& s) {
    for (const Mark& m : s.marks) {
      give(m.begin);
      give(m.end);
    }
    s.marks.clear();
    give(s.end_event);
    s.end_event = -1;
    s.last_end.fill(-1);
  }

  bool complete(const Slot& s) const {
    if (!done(s.end_event)) return false;
    for (int e : s.last_end) {
      if (!done(e)) return false;
    }
    return true;
  }
};

}  // namespace liftoff
