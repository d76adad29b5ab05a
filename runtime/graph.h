// CUDA graphs: the work one thread queues on a device's compute stream is captured once and replayed with a
// single launch, so a small-batch step no longer waits on the host launching hundreds of kernels.
//
// What capture requires of the captured code (the training step already works this way, design rule 4):
// no host read of device values, no host random draws (kernel draws through Generator::next_draw are
// graph-safe: each replay draws fresh numbers, runtime/random.h), no allocation outside the caching
// allocator, shapes fixed. Memory allocated during capture comes from a private pool of the caching allocator
// and stays with the graph; tensors created outside and read by the graph (parameters, optimizer state,
// static inputs) must stay alive and in place while it may replay. Code that cannot be captured calls
// check_not_capturing(), which throws GraphCaptureError, so a capture attempt fails cleanly instead of
// recording a wrong graph.
#pragma once
#include <memory>
#include <vector>

#include "runtime/capture.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace liftoff {

class CudaGraph {
 public:
  // A graph for `device` (CUDA). Throws DeviceError for a CPU device or a build without CUDA.
  explicit CudaGraph(Device device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Starts capturing the device's compute stream (relaxed mode: other threads keep working) with
  // allocations on it routed to this graph's private pool. Nothing queued while capturing runs on the device.
  void begin_capture();
  // Ends the capture and instantiates the graph. `record_events` are the events (cudaEvent_t) the captured
  // code recorded as external event-record nodes, in order; replay() can rebind them. Throws
  // GraphCaptureError with the reason when the capture was invalidated.
  void end_capture(const std::vector<void*>& record_events = {});
  // Ends a capture after an error without instantiating; never throws.
  void abort_capture() noexcept;
  bool ready() const;
  // Launches the graph on the compute stream. `record_events` (empty, or one per event-record node in
  // capture order) replace the events those nodes record, so each replay can be timed on its own events.
  void replay(const std::vector<void*>& record_events = {});
  size_t num_nodes() const;
  int64_t replays() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace liftoff
