// The CUDA backend of runtime/stream.h (runtime/stream_backend.h): events are cuda::Event
// (runtime/cuda/event.h), streams the per-device streams and lanes of runtime/cuda/context.h.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/event.h"
#include "runtime/cuda/pinned_allocator.h"
#include "runtime/stream_backend.h"

namespace liftoff::detail {

namespace {

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

cuda::Event make_event(int device, bool timing, bool blocking_sync) {
  cuda::DeviceGuard guard(device);  // cuda::Event belongs to the device current at its creation
  return cuda::Event(timing, blocking_sync);
}

class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent(int device, bool timing, bool blocking_sync)
      : event_(make_event(device, timing, blocking_sync)) {}
  void record(void* stream, int stream_device, bool graph_node) override {
    event_.record_on(as_stream(stream), stream_device, graph_node);
  }
  void wait(void* stream) const override { event_.wait(as_stream(stream)); }
  bool query() const override { return event_.query(); }
  void synchronize() const override { event_.synchronize(); }
  void* native() const override { return event_.get(); }
  void mark_recorded() override { event_.mark_recorded(); }
  double elapsed_ms_since(const DeviceEvent& start) const override {
    return static_cast<double>(cuda::Event::elapsed_ms(static_cast<const CudaEvent&>(start).event_, event_));
  }

 private:
  cuda::Event event_;
};

cudaMemcpyKind memcpy_kind(CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_host:
      return cudaMemcpyHostToHost;
    case CopyKind::host_to_device:
      return cudaMemcpyHostToDevice;
    case CopyKind::device_to_host:
      return cudaMemcpyDeviceToHost;
    case CopyKind::device_to_device:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

}  // namespace

std::unique_ptr<DeviceEvent> make_device_event(int device, bool timing, bool blocking_sync) {
  return std::make_unique<CudaEvent>(device, timing, blocking_sync);
}

void* device_stream(int device, StreamKind kind) {
  switch (kind) {
    case StreamKind::compute:
      return cuda::compute_stream(device);
    case StreamKind::copy:
      return cuda::copy_stream(device);
    case StreamKind::comm:
      return cuda::comm_stream(device);
  }
  return nullptr;
}

void* device_lane_stream(int device, int lane) {
  return cuda::lane_stream(device, lane);
}

void device_stream_synchronize(int device, void* stream) {
  cuda::DeviceGuard guard(device);
  LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

void device_prepare_lanes(int device, int count) {
  cuda::prepare_lanes(device, count);
}

void device_set_active_lane(int device, int lane) {
  cuda::set_active_lane(device, lane);
}

void device_profiler_range(int device, bool on) {
  cuda::DeviceGuard guard(device);
  LIFTOFF_CUDA_CHECK(on ? cudaProfilerStart() : cudaProfilerStop());
}

void device_copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), as_stream(stream)));
}

std::shared_ptr<void> device_allocate_pinned_host(size_t bytes) {
  return cuda::PinnedAllocator::get().allocate_shared(bytes);
}

}  // namespace liftoff::detail
