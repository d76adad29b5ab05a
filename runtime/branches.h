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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/device.h"
#include "runtime/tensor.h"

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

namespace detail {
// A backward's side lane (runtime/autograd.cpp keeps one per backward): a convolution's weight gradient,
// which only the leaf's .grad reads, runs on lane 1 while the compute stream goes on down the chain of input
// gradients, so the small kernels of both share the GPU (in a captured step: two parallel graph paths).
// - run() forks: the lane waits for the compute stream's work so far, then runs the work there. The tensors
//   it reads stay alive until the next join (their memory would otherwise go back to the compute stream's
//   cache and be reused there while the lane still reads it); the tensors it returns are pending until then.
// - The engine must not let anything read a pending tensor before join(): it sets aside the nodes a pending
//   gradient flows into and runs them after the join, and joins before a sum that involves one.
// - join(): the compute stream waits for the lane and the held tensors are let go. The engine joins when the
//   held tensors exceed kHeldBytes (peak memory stays near one stream's), when only set-aside nodes are
//   left, and at the end of the backward (a capture must end joined).
// Active when LIFTOFF_WGRAD_LANE allows it (auto: while this thread captures `device`'s graph; on: also
// eagerly), `device` is CUDA, no concurrent branches run on this thread, and the lane is prepared (a capture
// cannot create it). Inactive, it is a no-op and run() is never called.
class BackwardSideLane {
 public:
  static constexpr size_t kHeldBytes = size_t{64} << 20;

  // `allowed`: the caller's own conditions (no leaf of the backward has gradient hooks, which read .grad
  // the moment it is set; DDP's all-reduce would otherwise wait for the end of the backward).
  BackwardSideLane(Device device, bool allowed);
  ~BackwardSideLane();  // joins if join(true) was not reached (an exception); never throws
  BackwardSideLane(const BackwardSideLane&) = delete;
  BackwardSideLane& operator=(const BackwardSideLane&) = delete;

  bool active() const { return active_; }
  // Runs `work` on the lane; `reads` stay alive until the join; the returned tensors are pending.
  std::vector<Tensor> run(std::vector<Tensor> reads, const std::function<std::vector<Tensor>()>& work);
  bool pending(const Tensor& t) const;
  bool wants_join() const { return held_bytes_ > kHeldBytes; }
  // The compute stream waits for the lane; `last` also ends the lane's part in a capture.
  void join(bool last = false);

 private:
  Device device_;
  bool active_ = false;
  bool forked_ = false;  // work queued on the lane since the last join
  int pool_ = 0;         // the capture's private pool, begun on the lane at its first use
  bool pool_begun_ = false;
  size_t held_bytes_ = 0;
  std::vector<Tensor> held_;
  std::vector<const void*> pending_;  // TensorImpl addresses (held_ keeps them from being reused)
};

// The side lane of the backward running on this thread, when active; null otherwise.
BackwardSideLane* active_side_lane();
// How many pieces of work side lanes have run in this process (tests check that the lane was taken).
int64_t side_lane_runs();
}  // namespace detail

// Makes the backward's side lane ready on a CUDA device ahead of a capture (which cannot create it), unless
// LIFTOFF_WGRAD_LANE=off; a failure leaves the lane off, the captured backward on one stream.
void prepare_side_lane(Device device) noexcept;

}  // namespace liftoff
