// Concurrent branches: independent pieces of a step (the micro-batches of an accumulation cycle) queued on
// separate streams of one CUDA device, so that the small kernels of different branches share the GPU
// instead of running one after another. The host still issues the branches one after the other; only the
// device runs them side by side.
//
// Branch 0 runs on the compute stream itself, branch k on lane k mod `lanes` (runtime/cuda/context.h). The
// constructor forks (every lane waits for the compute stream's work so far); join() makes the compute
// stream wait for every lane. Inside a graph capture the lanes join the capture and allocate from its
// private pool, so the captured graph has one parallel path per lane.
//
// What branches may share:
// - tensors made before the fork and only read by the branches (parameters, static inputs); they must stay
//   alive until join (their memory would otherwise return to the compute stream's cache while a lane still
//   reads it);
// - state that several branches update in place (batch-norm running statistics), or that one branch writes
//   and later ones read (a weight cast cached by the first branch): the code touching it calls
//   order_shared_state(key) before and record_shared_state(key) after queuing the access. A branch then
//   waits for the last recorded access of `key` by another branch, so the updates happen in branch order,
//   as in sequential code.
// On a CPU device, and outside branches, everything here is a no-op: the branches simply run in order.
#pragma once
#include <cstdint>
#include <memory>

#include "runtime/device.h"

namespace liftoff {

class ConcurrentBranches {
 public:
  // Forks `lanes` streams (1..16; 1 runs every branch on the compute stream) on `device`. The lanes beyond
  // the compute stream are created on first use, which cannot happen during a graph capture (prepare them
  // with prepare_concurrent_lanes first). One set of branches per thread at a time.
  ConcurrentBranches(Device device, int lanes);
  ~ConcurrentBranches();  // joins if join() was not reached (an exception); never throws
  ConcurrentBranches(const ConcurrentBranches&) = delete;
  ConcurrentBranches& operator=(const ConcurrentBranches&) = delete;

  // Queues the calling thread's compute work for branch `index` (>= 0) until leave() or join().
  void enter(int index);
  void leave();
  // The compute stream waits for every lane; compute work goes to the compute stream again.
  void join();
  int lanes() const;

  struct Impl;  // opaque; public for the shared-state functions below

 private:
  std::unique_ptr<Impl> impl_;
};

// Makes `lanes` lanes ready on a CUDA device (streams, handles, workspaces as large as the compute stream's)
// so that branches can fork during a later capture; no-op for a CPU device or lanes <= 1.
void prepare_concurrent_lanes(Device device, int lanes);

// For sizing concurrent branches: device memory free now (driver) and the caching allocator's peak
// allocation since its last reset; zeros on a CPU device.
struct BranchMemory {
  int64_t free_bytes = 0;
  int64_t peak_allocated = 0;
};
BranchMemory branch_memory(Device device);

// Orders an access to shared state `key` after the last one recorded by another branch (see above).
void order_shared_state(const void* key);
// Records that the current branch has queued an access to `key`.
void record_shared_state(const void* key);

}  // namespace liftoff
