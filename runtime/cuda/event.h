// A small RAII wrapper around cudaEvent_t: record on a stream, make another stream wait for it, query it
// without blocking, block on it (outside a training step only), and read the time between two events.
#pragma once
#include <cuda_runtime.h>

namespace liftoff::cuda {

class Event {
 public:
  // timing: the event can be used with elapsed_ms (costs a little). blocking_sync: synchronize() yields the
  // CPU instead of spinning (for waits on worker threads).
  explicit Event(bool timing = false, bool blocking_sync = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work queued on `stream` so far. An event belongs to one device: when `stream` is on another
  // device than the event was made on (a rank on cuda:1 whose thread's current device is 0), the event is
  // re-created there first, so callers need not hold a DeviceGuard.
  void record(cudaStream_t stream);
  // record() for a caller that knows the stream's device (no cudaStreamGetDevice per record). graph_node:
  // while `stream` is captured, an event-record node of the graph (cudaEventRecordExternal) instead of an
  // edge.
  void record_on(cudaStream_t stream, int stream_device, bool graph_node = false);
  // Work queued on `stream` after this call starts only when the recorded work is done (device-side wait).
  void wait(cudaStream_t stream) const;
  // True when the recorded work is done, or nothing was recorded; never blocks.
  bool query() const;
  // Blocks the calling thread until the recorded work is done. Not inside a training step.
  void synchronize() const;
  bool recorded() const { return recorded_; }
  // Counts the event as recorded without recording it: an event-record node of a CUDA graph, rebound to this
  // event (CudaGraph::replay), records it when the graph replays.
  void mark_recorded() { recorded_ = true; }
  cudaEvent_t get() const { return event_; }

  // Milliseconds between two completed timing events (start recorded before end).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
  unsigned flags_ = 0;
  int device_ = -1;  // the device event_ was created on
  bool recorded_ = false;
};

}  // namespace liftoff::cuda
