// Streams and events, device-independent: code that orders or times device work (the profiler, the data
// loader, concurrent branches) names a Stream and records Events without #if LIFTOFF_WITH_CUDA.
//
// A Stream is a cheap handle: a device plus which of its queues (compute, copy, comm, or a lane of
// runtime/cuda/context.h). The CPU has one stream and it is synchronous: work "queued" on it is done when the
// call returns. An Event marks a point in a stream: on a CUDA device it is a cudaEvent_t
// (runtime/cuda/event.h); on the CPU it takes the host clock (steady_clock) when recorded, is complete at
// once, and two of them give the host time between their records.
//
// The CUDA implementation lives in runtime/cuda/stream_cuda.cpp; a build without CUDA links
// runtime/stream_no_cuda.cpp instead, whose functions throw DeviceError ("built without CUDA") for a CUDA
// device. Nothing here synchronises the host unless its name says so (synchronize); recording, waiting,
// querying and copying are asynchronous and capturable in a CUDA graph.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/device.h"

namespace liftoff {

// The per-device streams of runtime/cuda/context.h.
enum class StreamKind : uint8_t { compute, copy, comm };
constexpr int kNumStreams = 3;
const char* stream_name(StreamKind kind);  // "compute", "copy", "comm"

class Event;

class Stream {
 public:
  Stream() = default;  // the CPU stream
  static Stream cpu() { return Stream(); }
  // The device's stream of `kind`. compute is resolved at each use: it is the calling thread's compute
  // stream then (a ConcurrentBranches lane when one is active, runtime/branches.h); copy and comm are fixed.
  // A CPU device gives the CPU stream; a CUDA device in a build without CUDA throws DeviceError.
  static Stream of(Device device, StreamKind kind = StreamKind::compute);
  // Lane `lane` of a CUDA device (0: its compute stream itself), prepared with prepare_lanes.
  static Stream lane(Device device, int lane);

  Device device() const { return device_; }
  StreamKind kind() const { return kind_; }
  int lane_index() const { return lane_; }  // -1 unless made by lane()
  bool is_cpu() const { return device_.is_cpu(); }
  // cudaStream_t (as void*) of a CUDA stream, resolved now; nullptr for the CPU stream.
  void* native() const;
  // This stream as it is resolved now, fixed from then on (a compute stream keeps the lane active now): for a
  // function that queues several things on it without looking it up each time.
  Stream resolved() const;
  // Work queued on this stream from now on waits for `event` (device-side; a no-op on the CPU).
  void wait(const Event& event) const;
  // Blocks the host until the stream's queued work is done. Not inside a training step.
  void synchronize() const;

 private:
  Device device_ = Device::cpu();
  StreamKind kind_ = StreamKind::compute;
  int lane_ = -1;
  void* fixed_ = nullptr;  // copy/comm/lane streams: resolved once (they never change)
};

namespace detail {
class DeviceEvent;  // the CUDA side of an Event (runtime/stream_backend.h)
}  // namespace detail

class Event {
 public:
  Event();  // a CPU event
  // An event of `device`, created now (not per record: create events once and reuse them). timing: usable
  // with elapsed_ms (costs a little on CUDA; CPU events always time). blocking_sync: synchronize() yields the
  // CPU instead of spinning (for waits on worker threads).
  explicit Event(Device device, bool timing = false, bool blocking_sync = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the work queued on `stream` so far (the stream's device must be the event's). CPU: takes the time.
  void record(const Stream& stream);
  // While `stream` is captured into a CUDA graph: adds an event-record node (the graph records this event at
  // every replay; CudaGraph can rebind it) instead of a dependency inside the graph. Otherwise like record.
  void record_node(const Stream& stream);
  // For a graph replay that rebinds one of its event-record nodes to this event: returns native() and counts
  // the event as recorded from now on (the replay records it). CPU: takes the time and returns nullptr.
  void* record_by_graph();
  // Work queued on `stream` after this call starts when the recorded work is done. No-op when nothing was
  // recorded, and on the CPU (its work is done already).
  void wait(const Stream& stream) const { stream.wait(*this); }
  // True when the recorded work is done, or nothing was recorded; never blocks.
  bool query() const;
  // Blocks the host until the recorded work is done. Not inside a training step.
  void synchronize() const;
  bool recorded() const { return recorded_; }
  Device device() const { return device_; }
  // cudaEvent_t (as void*) of a CUDA event; nullptr for a CPU event.
  void* native() const;

  // Milliseconds between two completed records of events of one device (start recorded before end). CUDA:
  // both made with timing. CPU: host clock time between the records.
  static double elapsed_ms(const Event& start, const Event& end);

 private:
  friend class Stream;
  Device device_ = Device::cpu();
  bool recorded_ = false;
  double host_ms_ = 0.0;                               // CPU: steady_clock time of the last record
  std::unique_ptr<detail::DeviceEvent> device_event_;  // CUDA
};

// Lanes: side streams of a CUDA device for work that runs concurrently with its compute stream (lane 0).
// prepare_lanes makes lanes 1..count-1 ready (outside a graph capture); set_active_lane routes the calling
// thread's compute stream (Stream::of(device) and the ops) to a lane. No-ops on the CPU.
void prepare_lanes(Device device, int count);
void set_active_lane(Device device, int lane);

// Brackets a region for an external profiler started with profiling off (e.g. `ncu --profile-from-start off`):
// cudaProfilerStart / cudaProfilerStop on a CUDA device; a no-op on the CPU.
void set_profiler_range(Device device, bool on);

// Asynchronous copies on a stream, for raw buffers (tensors have Tensor::copy_). The direction is explicit.
// From page-locked host memory (allocate_pinned_host) the copy is asynchronous; from pageable memory the
// driver stages it before returning. The CPU stream copies at once (host_to_host only).
enum class CopyKind { host_to_host, host_to_device, device_to_host, device_to_device };
void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, const Stream& stream);

// Page-locked host memory (cached: runtime/cuda/pinned_allocator.h) for asynchronous copies to and from any
// CUDA device; freed back to its cache with the last shared_ptr. The owner keeps it alive until the copies
// reading it completed (an event). Throws DeviceError in a build without CUDA.
std::shared_ptr<void> allocate_pinned_host(size_t bytes);

}  // namespace liftoff
