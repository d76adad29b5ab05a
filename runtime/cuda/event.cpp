#include "runtime/cuda/event.h"

#include <utility>

#include "runtime/capture.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"

namespace liftoff::cuda {

Event::Event(bool timing, bool blocking_sync) {
  flags_ = timing ? cudaEventDefault : cudaEventDisableTiming;
  if (blocking_sync) flags_ |= cudaEventBlockingSync;
  LIFTOFF_CUDA_CHECK(cudaGetDevice(&device_));
  LIFTOFF_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags_));
}

Event::~Event() {
  // No check: destructors must not throw, and a failing destroy at shutdown has no remedy.
  if (event_ != nullptr) cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      flags_(other.flags_),
      device_(other.device_),
      recorded_(std::exchange(other.recorded_, false)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    flags_ = other.flags_;
    device_ = other.device_;
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

void Event::record(cudaStream_t stream) {
  int stream_device = 0;
  if (graph_capture_active()) {
    // cudaStreamGetDevice is refused on a capturing stream (and would invalidate the capture); the streams
    // joined into a capture belong to the captured device.
    stream_device = graph_capture_device();
  } else {
    LIFTOFF_CUDA_CHECK(cudaStreamGetDevice(stream, &stream_device));
  }
  record_on(stream, stream_device);
}

void Event::record_on(cudaStream_t stream, int stream_device, bool graph_node) {
  if (stream_device != device_) {
    DeviceGuard guard(stream_device);
    cudaEvent_t fresh = nullptr;
    LIFTOFF_CUDA_CHECK(cudaEventCreateWithFlags(&fresh, flags_));
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = fresh;
    device_ = stream_device;
  }
  if (graph_node) {
    LIFTOFF_CUDA_CHECK(cudaEventRecordWithFlags(event_, stream, cudaEventRecordExternal));
  } else {
    LIFTOFF_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  recorded_ = true;
}

void Event::wait(cudaStream_t stream) const {
  if (recorded_) LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool Event::query() const {
  if (!recorded_) return true;
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not-ready is not sticky, but keep the last-error slot clean for launch checks
    return false;
  }
  LIFTOFF_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  if (recorded_) LIFTOFF_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  LIFTOFF_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

}  // namespace liftoff::cuda
