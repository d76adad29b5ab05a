#include "runtime/stream.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "runtime/capture.h"
#include "runtime/error.h"
#include "runtime/stream_backend.h"

namespace liftoff {

namespace {
constexpr const char* kStreamNames[kNumStreams] = {"compute", "copy", "comm"};

double host_now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void check_cuda_built(Device device) {
  LIFTOFF_CHECK(built_with_cuda(), DeviceError, "cannot use a stream of ", device.str(),
                ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
}

// An event and a stream must both be on the CPU or both on CUDA devices.
void check_same_kind(const Event& event, const Stream& stream, const char* what) {
  LIFTOFF_CHECK(event.device().is_cpu() == stream.is_cpu(), ValueError, "Event::", what, ": an event of ",
                event.device().str(), " and a stream of ", stream.device().str(),
                "; record and wait on streams of the event's device type");
}
}  // namespace

const char* stream_name(StreamKind kind) {
  return kStreamNames[static_cast<int>(kind)];
}

// ---------------------------------------------------------------------------------------------------------
// Stream

Stream Stream::of(Device device, StreamKind kind) {
  Stream s;
  if (device.is_cpu()) return s;
  check_cuda_built(device);
  s.device_ = device;
  s.kind_ = kind;
  // The compute stream follows the thread's active lane, so it is looked up at each use.
  if (kind != StreamKind::compute) s.fixed_ = detail::device_stream(device.index, kind);
  return s;
}

Stream Stream::lane(Device device, int lane) {
  Stream s;
  if (device.is_cpu()) return s;
  check_cuda_built(device);
  s.device_ = device;
  s.lane_ = lane;
  s.fixed_ = detail::device_lane_stream(device.index, lane);
  return s;
}

void* Stream::native() const {
  if (is_cpu()) return nullptr;
  return fixed_ != nullptr ? fixed_ : detail::device_stream(device_.index, kind_);
}

Stream Stream::resolved() const {
  Stream s = *this;
  s.fixed_ = native();
  return s;
}

void Stream::wait(const Event& event) const {
  if (event.device().is_cpu()) return;  // CPU work is done when its call returns
  LIFTOFF_CHECK(!is_cpu(), ValueError, "Stream::wait: the CPU stream cannot wait for an event of ",
                event.device().str(), " (its work runs on the device); synchronize() the event instead");
  if (event.recorded_) event.device_event_->wait(native());
}

void Stream::synchronize() const {
  if (!is_cpu()) detail::device_stream_synchronize(device_.index, native());
}

// ---------------------------------------------------------------------------------------------------------
// Event

Event::Event() = default;

Event::Event(Device device, bool timing, bool blocking_sync) : device_(device) {
  if (device.is_cpu()) return;
  check_cuda_built(device);
  device_event_ = detail::make_device_event(device.index, timing, blocking_sync);
}

Event::~Event() = default;

Event::Event(Event&& other) noexcept
    : device_(std::exchange(other.device_, Device::cpu())),
      recorded_(std::exchange(other.recorded_, false)),
      host_ms_(other.host_ms_),
      device_event_(std::move(other.device_event_)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    device_ = std::exchange(other.device_, Device::cpu());
    recorded_ = std::exchange(other.recorded_, false);
    host_ms_ = other.host_ms_;
    device_event_ = std::move(other.device_event_);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  check_same_kind(*this, stream, "record");
  if (device_.is_cpu()) {
    host_ms_ = host_now_ms();
  } else {
    device_event_->record(stream.native(), stream.device().index, false);
  }
  recorded_ = true;
}

void Event::record_node(const Stream& stream) {
  check_same_kind(*this, stream, "record_node");
  if (device_.is_cpu()) {
    host_ms_ = host_now_ms();
  } else {
    // An external event-record node only exists inside a capture; outside one it is an ordinary record.
    device_event_->record(stream.native(), stream.device().index, graph_capture_active());
  }
  recorded_ = true;
}

void* Event::record_by_graph() {
  recorded_ = true;
  if (device_.is_cpu()) {
    host_ms_ = host_now_ms();
    return nullptr;
  }
  device_event_->mark_recorded();
  return device_event_->native();
}

bool Event::query() const {
  return device_.is_cpu() || !recorded_ || device_event_->query();
}

void Event::synchronize() const {
  if (!device_.is_cpu() && recorded_) device_event_->synchronize();
}

void* Event::native() const {
  return device_event_ ? device_event_->native() : nullptr;
}

double Event::elapsed_ms(const Event& start, const Event& end) {
  LIFTOFF_CHECK(start.device_.is_cpu() == end.device_.is_cpu(), ValueError, "Event::elapsed_ms: events of ",
                start.device_.str(), " and ", end.device_.str());
  LIFTOFF_CHECK(start.recorded_ && end.recorded_, ValueError,
                "Event::elapsed_ms: both events must have been recorded");
  if (start.device_.is_cpu()) return end.host_ms_ - start.host_ms_;
  return end.device_event_->elapsed_ms_since(*start.device_event_);
}

// ---------------------------------------------------------------------------------------------------------
// Lanes, copies, pinned memory

void prepare_lanes(Device device, int count) {
  if (device.is_cpu()) return;
  check_cuda_built(device);
  detail::device_prepare_lanes(device.index, count);
}

void set_active_lane(Device device, int lane) {
  if (device.is_cpu()) return;
  check_cuda_built(device);
  detail::device_set_active_lane(device.index, lane);
}

void set_profiler_range(Device device, bool on) {
  if (device.is_cpu()) return;
  check_cuda_built(device);
  detail::device_profiler_range(device.index, on);
}

void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, const Stream& stream) {
  if (stream.is_cpu()) {
    LIFTOFF_CHECK(kind == CopyKind::host_to_host, ValueError,
                  "copy_async: the CPU stream copies host to host only");
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  detail::device_copy_async(dst, src, bytes, kind, stream.native());
}

std::shared_ptr<void> allocate_pinned_host(size_t bytes) {
  return detail::device_allocate_pinned_host(bytes);
}

}  // namespace liftoff
