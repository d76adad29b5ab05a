#include "runtime/profile/profiler.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "runtime/error.h"
#include "runtime/platform/cpu_usage.h"
#include "runtime/profile/profiler_device_state.h"
#include "runtime/stream.h"

namespace liftoff {

namespace {
using profile_detail::now_s;

constexpr const char* kStageNames[kNumStages] = {"data_wait", "h2d",       "augment",   "forward",
                                                 "backward",  "allreduce", "optimizer", "other"};

double to_s(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Two steps closer than this are one window for the NVML averages (progress printing between steps is
// training time; an evaluation pass is not).
constexpr double kWindowMergeGapS = 0.5;

}  // namespace

const char* stage_name(Stage stage) {
  return kStageNames[static_cast<int>(stage)];
}

std::optional<Stage> stage_from_name(const std::string& name) {
  for (int i = 0; i < kNumStages; ++i) {
    if (name == kStageNames[i]) return static_cast<Stage>(i);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------

Profiler::Profiler(ProfilerOptions options) : options_(options) {
  LIFTOFF_CHECK(options_.lag >= 0, ValueError, "Profiler: lag must be >= 0, got ", options_.lag);
  LIFTOFF_CHECK(options_.max_marks_per_step >= 1, ValueError,
                "Profiler: max_marks_per_step must be >= 1, got ", options_.max_marks_per_step);
  LIFTOFF_CHECK(options_.warmup_steps >= 0, ValueError, "Profiler: warmup_steps must be >= 0, got ",
                options_.warmup_steps);
  origin_s_ = now_s();
  main_tid_ = platform::current_thread_id();
  step_spans_.resize(static_cast<size_t>(options_.max_marks_per_step));
}

Profiler::~Profiler() = default;

void Profiler::set_device(Device device) {
  LIFTOFF_CHECK(!in_step_, ValueError, "Profiler::set_device: called inside a step");
  if (device == device_ && (dev_ != nullptr || device.is_cpu())) return;
  if (dev_) finish();
  dev_.reset();
  device_ = device;
  if (!device.is_cuda()) return;
  LIFTOFF_CHECK(built_with_cuda(), DeviceError, "Profiler: device ", device.str(),
                " requested, but Liftoff was built without CUDA");
  dev_ = std::make_unique<DeviceState>(device, options_);
}

bool Profiler::keeps_trace_for(int64_t step) const {
  return options_.keep_trace && step < options_.trace_max_steps;
}

void Profiler::begin_step() {
  if (in_step_) return;
  in_step_ = true;
  step_begin_s_ = now_s();
  step_host_ms_.fill(0.0);
  step_host_calls_.fill(0);
  step_span_count_ = 0;
  if (dev_) {
    DeviceState& d = *dev_;
    if (d.count == d.ring.size()) {
      // The device is further behind than the ring allows: give up on the oldest step's device timing
      // rather than wait for it. Re-recording its events later is allowed while they are still pending.
      d.recycle(d.slot_at(0));
      d.head = (d.head + 1) % d.ring.size();
      --d.count;
      ++device_steps_dropped_;
    }
    DeviceState::Slot& s = d.slot_at(d.count);
    ++d.count;
    s.step = step_;
    s.measured = step_ >= options_.warmup_steps;
    s.incomplete = false;
    s.begin_s = step_begin_s_;
    s.marks.clear();
    s.last_end.fill(-1);
    s.end_event = -1;
    d.open.fill(-1);
  }
}

void Profiler::begin_host_stage(Stage stage) {
  LIFTOFF_CHECK(in_step_, ValueError, "Profiler: host stage '", stage_name(stage), "' begun outside a step");
  LIFTOFF_CHECK(open_host_stage_ < 0, ValueError, "Profiler: host stage '", stage_name(stage),
                "' begun inside host stage '", stage_name(static_cast<Stage>(open_host_stage_)),
                "' (host stages must not nest: 'other' is the step time they leave)");
  LIFTOFF_CHECK(stage != Stage::other, ValueError, "Profiler: 'other' is computed, not timed");
  open_host_stage_ = static_cast<int>(stage);
  host_stage_begin_s_ = now_s();
}

void Profiler::close_host_stage(Stage stage) noexcept {
  if (open_host_stage_ != static_cast<int>(stage)) return;
  const double end = now_s();
  const size_t i = static_cast<size_t>(stage);
  step_host_ms_[i] += (end - host_stage_begin_s_) * 1e3;
  ++step_host_calls_[i];
  open_host_stage_ = -1;
  if (keeps_trace_for(step_)) {
    if (step_span_count_ < step_spans_.size()) {
      step_spans_[step_span_count_++] =
          TraceSpan{stage_name(stage), step_, host_stage_begin_s_, end, main_tid_, false};
    } else {
      ++trace_spans_dropped_;
    }
  }
}

void Profiler::end_host_stage(Stage stage) {
  LIFTOFF_CHECK(open_host_stage_ == static_cast<int>(stage), ValueError, "Profiler: end of host stage '",
                stage_name(stage), "' that is not open");
  close_host_stage(stage);
}

void Profiler::begin_device_stage(Stage stage, StreamKind stream) {
  LIFTOFF_CHECK(in_step_, ValueError, "Profiler: device stage '", stage_name(stage),
                "' begun outside a step");
  if (!dev_) return;
  DeviceState& d = *dev_;
  const size_t key = static_cast<size_t>(stage) * kNumStreams + static_cast<size_t>(stream);
  LIFTOFF_CHECK(d.open[key] < 0, ValueError, "Profiler: device stage '", stage_name(stage), "' on the ",
                stream_name(stream), " stream begun twice");
  DeviceState::Slot& s = d.slot_at(d.count - 1);
  if (s.marks.size() >= static_cast<size_t>(options_.max_marks_per_step)) {
    s.incomplete = true;
    ++marks_dropped_;
    return;
  }
  const int e = d.take();
  d.record(e, stream);
  d.open[key] = e;
  if (d.mode == DeviceState::MarkMode::capture) graph_calls_.push_back({stage, stream, true});
}

void Profiler::end_device_stage(Stage stage, StreamKind stream) {
  if (!dev_) return;
  DeviceState& d = *dev_;
  const size_t key = static_cast<size_t>(stage) * kNumStreams + static_cast<size_t>(stream);
  DeviceState::Slot& s = d.slot_at(d.count - 1);
  if (d.open[key] < 0) {
    // Its begin was dropped (too many marks): the step is already marked incomplete.
    LIFTOFF_CHECK(s.incomplete && in_step_, ValueError, "Profiler: end of device stage '", stage_name(stage),
                  "' on the ", stream_name(stream), " stream that was not begun");
    return;
  }
  const int e = d.take();
  d.record(e, stream);
  if (d.mode == DeviceState::MarkMode::capture) graph_calls_.push_back({stage, stream, false});
  s.marks.push_back(DeviceState::Mark{stage, stream, d.open[key], e});
  s.last_end[static_cast<size_t>(stream)] = e;
  d.open[key] = -1;
}

void Profiler::begin_capture() {
  graph_calls_.clear();
  if (!dev_) return;
  dev_->mode = DeviceState::MarkMode::capture;
  dev_->mode_events.clear();
}

void Profiler::end_capture(std::vector<void*>* record_events) {
  if (!dev_) return;
  // mode_events stay until the next capture or replay: abort_capture may still need them.
  record_events->insert(record_events->end(), dev_->mode_events.begin(), dev_->mode_events.end());
  dev_->mode = DeviceState::MarkMode::record;
  graph_marks_dropped_ = dev_->count > 0 && dev_->slot_at(dev_->count - 1).incomplete;
}

void Profiler::abort_capture() noexcept {
  graph_calls_.clear();
  if (!dev_) return;
  DeviceState& d = *dev_;
  if (d.count > 0) {
    // The marks of the failed capture were never recorded: the step's device figures cannot be trusted, and
    // its events must never be queried (an event last recorded in a capture cannot be), so they go back to
    // the pool and the slot forgets them.
    DeviceState::Slot& s = d.slot_at(d.count - 1);
    s.incomplete = true;
    const auto captured = [&](int i) {
      if (i < 0) return false;
      const void* e = d.events[static_cast<size_t>(i)].native();
      return std::find(d.mode_events.begin(), d.mode_events.end(), e) != d.mode_events.end();
    };
    for (int& e : s.last_end) {
      if (captured(e)) e = -1;
    }
    auto kept = s.marks.begin();
    for (auto it = s.marks.begin(); it != s.marks.end(); ++it) {
      if (captured(it->begin) || captured(it->end)) {
        d.give(it->begin);
        d.give(it->end);
      } else {
        *kept++ = *it;
      }
    }
    s.marks.erase(kept, s.marks.end());
  }
  d.mode_events.clear();
  d.mode = DeviceState::MarkMode::record;
}

void Profiler::before_replay(std::vector<void*>* record_events) {
  if (!dev_ || graph_calls_.empty()) return;
  std::vector<void*>& out = *record_events;
  DeviceState& d = *dev_;
  if (d.sink < 0) d.sink = d.take();
  d.mode = DeviceState::MarkMode::defer;
  d.mode_events.clear();
  out.reserve(out.size() + graph_calls_.size());
  try {
    for (const GraphMarkCall& call : graph_calls_) {
      const size_t before = d.mode_events.size();
      if (call.begin) {
        begin_device_stage(call.stage, call.stream);
      } else {
        end_device_stage(call.stage, call.stream);
      }
      // A mark dropped in this step (too many marks) still needs an event for its node.
      out.push_back(d.mode_events.size() > before ? d.mode_events.back()
                                                  : d.events[static_cast<size_t>(d.sink)].native());
    }
  } catch (...) {
    d.mode = DeviceState::MarkMode::record;
    throw;
  }
  d.mode = DeviceState::MarkMode::record;
  d.mode_events.clear();
  // Marks the capture dropped are not in the graph: this step's device figures would be short.
  if (graph_marks_dropped_ && d.count > 0) d.slot_at(d.count - 1).incomplete = true;
}

void Profiler::cancel_device_stage(Stage stage, StreamKind stream) noexcept {
  if (!dev_) return;
  DeviceState& d = *dev_;
  const size_t key = static_cast<size_t>(stage) * kNumStreams + static_cast<size_t>(stream);
  if (d.open[key] < 0) return;
  d.give(d.open[key]);
  d.open[key] = -1;
  if (d.count > 0) d.slot_at(d.count - 1).incomplete = true;
}

void Profiler::add_window(std::vector<std::pair<double, double>>& windows, double begin_s, double end_s) {
  if (!windows.empty() && begin_s - windows.back().second <= kWindowMergeGapS) {
    windows.back().second = end_s;
  } else {
    windows.emplace_back(begin_s, end_s);
  }
}

void Profiler::end_step(int64_t images) {
  LIFTOFF_CHECK(in_step_, ValueError, "Profiler::end_step without begin_step");
  LIFTOFF_CHECK(open_host_stage_ < 0, ValueError, "Profiler::end_step inside host stage '",
                stage_name(static_cast<Stage>(open_host_stage_)), "'");
  const double end = now_s();
  const double wall_ms = (end - step_begin_s_) * 1e3;
  const bool measured = step_ >= options_.warmup_steps;
  ProfileTotals& t = measured ? measured_ : warmup_;
  double stages = 0.0;
  for (int i = 0; i < kNumStages; ++i) {
    if (i == static_cast<int>(Stage::other)) continue;
    t.host_ms[static_cast<size_t>(i)] += step_host_ms_[static_cast<size_t>(i)];
    t.host_calls[static_cast<size_t>(i)] += step_host_calls_[static_cast<size_t>(i)];
    stages += step_host_ms_[static_cast<size_t>(i)];
  }
  t.host_ms[static_cast<size_t>(Stage::other)] += std::max(0.0, wall_ms - stages);
  t.wall_ms_min = t.steps == 0 ? wall_ms : std::min(t.wall_ms_min, wall_ms);
  t.wall_ms_max = t.steps == 0 ? wall_ms : std::max(t.wall_ms_max, wall_ms);
  ++t.steps;
  t.images += images;
  t.wall_ms += wall_ms;
  t.wall_ms_sq += wall_ms * wall_ms;
  add_window(measured ? windows_ : warmup_windows_, step_begin_s_, end);
  ++steps_total_;

  if (keeps_trace_for(step_)) {
    std::lock_guard<std::mutex> lock(trace_mutex_);
    trace_.push_back(TraceSpan{"step", step_, step_begin_s_, end, main_tid_, false});
    trace_.insert(trace_.end(), step_spans_.begin(),
                  step_spans_.begin() + static_cast<std::ptrdiff_t>(step_span_count_));
  }
  in_step_ = false;

  if (dev_) {
    DeviceState& d = *dev_;
    DeviceState::Slot& s = d.slot_at(d.count - 1);
    for (int open : d.open) {
      if (open >= 0) s.incomplete = true;  // a begun mark never ended: the step's device figures are partial
    }
    for (int& open : d.open) {
      d.give(open);
      open = -1;
    }
    s.end_s = end;
    // Recorded before the slot's end event: a resolved slot implies its step end has completed too.
    const int step_end = d.take();
    d.record(step_end, StreamKind::compute);
    d.ends.push_back(DeviceState::StepEnd{step_begin_s_, images, measured, step_end});
    s.end_event = d.take();
    d.record(s.end_event, StreamKind::compute);
    // Resolve the steps at least `lag` steps old whose events have completed, oldest first.
    while (d.count > 0) {
      DeviceState::Slot& old = d.slot_at(0);
      if (step_ - old.step < options_.lag) break;
      if (!resolve_oldest(false)) break;
    }
    resolve_step_ends(false);
  } else {
    throughput_.add_step(step_begin_s_, end, images, measured);  // the CPU's work is done when it returns
  }
  ++step_;
  if (step_ == options_.warmup_steps && options_.on_warmup_end) options_.on_warmup_end();
}

void Profiler::abandon_step() {
  if (!in_step_) return;
  in_step_ = false;
  open_host_stage_ = -1;
  if (dev_) {
    DeviceState& d = *dev_;
    for (int& open : d.open) {
      d.give(open);
      open = -1;
    }
    d.recycle(d.slot_at(d.count - 1));
    --d.count;
  }
}

bool Profiler::resolve_oldest(bool wait) {
  DeviceState& d = *dev_;
  DeviceState::Slot& s = d.slot_at(0);
  if (wait) {
    d.events[static_cast<size_t>(s.end_event)].synchronize();
    for (int e : s.last_end) {
      if (e >= 0) d.events[static_cast<size_t>(e)].synchronize();
    }
  } else if (!d.complete(s)) {
    return false;
  }
  if (s.incomplete) {
    ++device_steps_dropped_;
  } else {
    ProfileTotals& t = s.measured ? measured_ : warmup_;
    // Device times as steady_clock seconds, through the anchor (a recent event: short float spans only).
    auto at = [&](int e) { return d.anchor_s + d.elapsed_ms(d.anchor, e) * 1e-3; };
    d.scratch.clear();
    const bool trace = keeps_trace_for(s.step);
    std::unique_lock<std::mutex> lock(trace_mutex_, std::defer_lock);
    if (trace) lock.lock();
    for (const DeviceState::Mark& m : s.marks) {
      const double ms = d.elapsed_ms(m.begin, m.end);
      const double b = at(m.begin);
      const double e = b + ms * 1e-3;
      t.device_ms[static_cast<size_t>(m.stage)] += ms;
      ++t.device_marks[static_cast<size_t>(m.stage)];
      d.scratch.push_back(DeviceState::Interval{b, e, m.stream, m.stage == Stage::allreduce});
      if (trace) {
        trace_.push_back(
            TraceSpan{stage_name(m.stage), s.step, b, e, -1 - static_cast<int64_t>(m.stream), true});
      }
    }
    if (lock.owns_lock()) lock.unlock();
    std::sort(
        d.scratch.begin(), d.scratch.end(),
        [](const DeviceState::Interval& x, const DeviceState::Interval& y) { return x.begin < y.begin; });
    // Busy: union of all marked intervals; a global cursor also merges with the previous step's tail.
    double busy_s = 0.0;
    for (const auto& iv : d.scratch) {
      if (iv.end <= d.busy_cursor_s) continue;
      busy_s += iv.end - std::max(iv.begin, d.busy_cursor_s);
      d.busy_cursor_s = iv.end;
    }
    // All-reduce overlap: comm-stream all-reduce time covered by compute-stream marks of the same step.
    d.compute_merged.clear();
    for (const auto& iv : d.scratch) {
      if (iv.stream != StreamKind::compute) continue;
      if (!d.compute_merged.empty() && iv.begin <= d.compute_merged.back().second) {
        d.compute_merged.back().second = std::max(d.compute_merged.back().second, iv.end);
      } else {
        d.compute_merged.emplace_back(iv.begin, iv.end);
      }
    }
    double overlapped_s = 0.0;
    for (const auto& iv : d.scratch) {
      if (!iv.allreduce) continue;
      for (const auto& c : d.compute_merged) {
        overlapped_s += std::max(0.0, std::min(iv.end, c.second) - std::max(iv.begin, c.first));
      }
    }
    const double end_at = at(s.end_event);
    ++t.device_steps;
    t.device_wall_ms += (s.end_s - s.begin_s) * 1e3;
    t.device_busy_ms += busy_s * 1e3;
    t.allreduce_overlapped_ms += overlapped_s * 1e3;
    // Negative lag is the anchoring error (microseconds), not a device ahead of its host.
    t.device_lag_ms += std::max(0.0, (end_at - s.end_s) * 1e3);
    // The step end becomes the new anchor; the old one goes back to the pool.
    d.give(d.anchor);
    d.anchor = s.end_event;
    d.anchor_s = end_at;
    s.end_event = -1;
  }
  d.recycle(s);
  d.head = (d.head + 1) % d.ring.size();
  --d.count;
  return true;
}

void Profiler::resolve_step_ends(bool wait) {
  DeviceState& d = *dev_;
  while (!d.ends.empty()) {
    const DeviceState::StepEnd& e = d.ends.front();
    if (wait) {
      d.events[static_cast<size_t>(e.event)].synchronize();
    } else if (!d.done(e.event)) {
      return;
    }
    const double end_s = d.ends_anchor_s + d.elapsed_ms(d.ends_anchor, e.event) * 1e-3;
    throughput_.add_step(e.begin_s, end_s, e.images, e.measured);
    d.give(d.ends_anchor);
    d.ends_anchor = e.event;
    d.ends_anchor_s = end_s;
    d.ends.pop_front();
  }
}

void Profiler::finish() {
  LIFTOFF_CHECK(!in_step_, ValueError, "Profiler::finish inside a step");
  if (!dev_) return;
  synchronize(dev_->device);
  while (dev_->count > 0) resolve_oldest(true);
  resolve_step_ends(true);
}

void Profiler::record_thread_span(const char* name, std::chrono::steady_clock::time_point begin,
                                  std::chrono::steady_clock::time_point end) {
  if (!options_.keep_trace) return;
  const int64_t tid = platform::current_thread_id();
  std::lock_guard<std::mutex> lock(trace_mutex_);
  if (static_cast<int64_t>(trace_.size()) >= options_.trace_max_steps * options_.max_marks_per_step) {
    ++trace_spans_dropped_;
    return;
  }
  trace_.push_back(TraceSpan{name, -1, to_s(begin), to_s(end), tid, false});
}

ProfileSummary Profiler::summary() const {
  ProfileSummary s;
  s.steps_total = steps_total_;
  const bool any_measured = measured_.steps > 0;
  s.totals = any_measured ? measured_ : warmup_;
  s.warmup_excluded = any_measured ? warmup_.steps : 0;
  s.all_steps_wall_ms = warmup_.wall_ms + measured_.wall_ms;
  s.all_steps_images = warmup_.images + measured_.images;
  s.device_timing = dev_ != nullptr;
  s.device_steps_dropped = device_steps_dropped_;
  s.marks_dropped = marks_dropped_;
  {
    std::lock_guard<std::mutex> lock(trace_mutex_);
    s.trace_spans_dropped = trace_spans_dropped_;
  }
  s.windows = any_measured ? windows_ : warmup_windows_;
  s.throughput = throughput_.figures();
  return s;
}

std::vector<TraceSpan> Profiler::trace_spans() const {
  std::lock_guard<std::mutex> lock(trace_mutex_);
  return trace_;
}

}  // namespace liftoff
