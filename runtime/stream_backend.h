// The device side of runtime/stream.h: what a device backend provides. Internal to runtime/ (stream.cpp is
// its only caller). Implemented by runtime/cuda/stream_cuda.cpp, or in a build without CUDA by
// runtime/stream_no_cuda.cpp, whose functions throw DeviceError; CMake compiles exactly one of the two, so
// no caller needs #if LIFTOFF_WITH_CUDA. Streams travel as void* (cudaStream_t), devices as indices.
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/stream.h"

namespace liftoff::detail {

class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // `stream` belongs to device `stream_device`; graph_node: an event-record node while it is captured.
  virtual void record(void* stream, int stream_device, bool graph_node) = 0;
  virtual void wait(void* stream) const = 0;
  virtual bool query() const = 0;
  virtual void synchronize() const = 0;
  virtual void* native() const = 0;
  virtual void mark_recorded() = 0;
  virtual double elapsed_ms_since(const DeviceEvent& start) const = 0;
};

std::unique_ptr<DeviceEvent> make_device_event(int device, bool timing, bool blocking_sync);
// compute: the calling thread's compute stream (its active lane).
void* device_stream(int device, StreamKind kind);
void* device_lane_stream(int device, int lane);
void device_stream_synchronize(int device, void* stream);
void device_prepare_lanes(int device, int count);
void device_set_active_lane(int device, int lane);
void device_profiler_range(int device, bool on);
void device_copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream);
std::shared_ptr<void> device_allocate_pinned_host(size_t bytes);

}  // namespace liftoff::detail
