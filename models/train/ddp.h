// DistributedDataParallel: data-parallel training over a process group (one process per GPU, or per CPU
// rank under MPI), with PyTorch DDP's semantics.
//
// - Construction broadcasts every parameter and buffer from rank 0, so all ranks start identical.
// - Gradients are grouped into buckets (~25 MB, parameters in reverse registration order: roughly the order
//   backward produces them; one dtype per bucket). A gradient-ready hook copies each finished gradient into
//   its bucket's flat buffer; when a bucket is complete (and every earlier bucket was launched: all ranks
//   issue collectives in the same order) its all-reduce (average) is launched on the communication stream,
//   so communication overlaps the rest of backward.
// - synchronize_gradients(), after the last backward of a step and before the optimizer, makes the compute
//   stream wait for the buckets (device-side, no host sync on CUDA) and points every parameter's .grad at its
//   averaged slice of the bucket (no copy back).
// - Gradient accumulation: set_require_sync(false) (or a NoSyncGuard) for the first K-1 micro-batches: the
//   hooks do nothing and gradients accumulate locally; the K-th backward, with sync on, reduces the sum.
// - AMP: buckets keep the gradients' dtype (f32 master weights, or bf16/f16 parameters). With a GradScaler,
//   sync_found_inf(scaler) after scaler.unscale_() makes every rank skip the same steps (all-reduce MAX of
//   found_inf, on the device).
// - CUDA graphs: the whole step, hooks and bucket all-reduces included, can be captured (the Trainer does
// it);
//   a captured step has no per-bucket timing (its events belong to the graph). With set_profiler(), the
//   span from the first bucket's start to the last bucket's end is a device mark of stage `allreduce` on the
//   communication stream, in eager and captured steps alike; the profiler derives the exposed and overlapped
//   shares from it.
// - Compression (DDPOptions::bf16_compress): f32 buckets are all-reduced as bf16 copies.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/nn/module.h"
#include "models/train/amp.h"
#include "runtime/capture.h"
#include "runtime/distributed/process_group.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

struct DDPOptions {
  double bucket_cap_mb = 25.0;       // bucket size limit in MiB (a larger parameter gets a bucket of its own)
  double first_bucket_cap_mb = 1.0;  // the first bucket's limit: its all-reduce overlaps the rest of backward
  bool broadcast_at_start = true;    // parameters and buffers from rank 0 at construction
  // f32 buckets travel as bf16 (PyTorch's bf16_compress_hook): half the bytes on the wire; each rank casts
  // its bucket down before the all-reduce (average) and the result back up (the f32 gradients keep bf16's 8
  // bits of mantissa). Buckets of other dtypes travel as they are.
  bool bf16_compress = false;
};

// Bucket assignment, separate so it can be tested without a process group.
struct BucketParam {
  size_t bytes = 0;
  DType dtype = DType::f32;
};
// Buckets of parameter indices. Parameters are taken last to first; each dtype fills its own open bucket,
// which is closed when the next parameter would push it over cap_bytes; a parameter of cap_bytes or more gets
// a bucket of its own. Buckets are returned in the order they close (= the order they become ready in
// backward); within a bucket, indices are in the order they were added (descending). Until the first bucket
// closes, first_cap_bytes is the limit instead (0: cap_bytes): a small first bucket starts communicating
// early in backward, while the rest of backward still runs (PyTorch's 1 MiB first bucket).
std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketParam>& params, size_t cap_bytes,
                                                size_t first_cap_bytes = 0);

struct DDPStats {
  int64_t sync_steps = 0;        // synchronize_gradients() calls that reduced gradients
  int64_t all_reduce_calls = 0;  // bucket all-reduces launched
  int64_t bytes_reduced = 0;
  // Timings, resolved late (only steps whose events have completed; never waits). CUDA: comm_ms is the
  // comm-stream time of the bucket all-reduces, exposed_ms the time the compute stream stood waiting for them
  // after backward, overlapped_ms = comm_ms - exposed_ms. CPU (MPI): exposed_ms is the host time
  // synchronize_gradients() waited; comm and overlap are not measured (device_timed false).
  int64_t timed_steps = 0;  // steps with timings (captured steps have none: see profiler marks)
  double comm_ms = 0.0;
  double exposed_ms = 0.0;
  double overlapped_ms = 0.0;
  bool device_timed = false;
};

class DistributedDataParallel : public CaptureParticipant {
 public:
  // The module's parameters must already be on group.device(). Broadcasts from rank 0 (collective: every
  // rank must construct its DDP at the same point).
  DistributedDataParallel(Module& module, distributed::ProcessGroup& group, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& x) { return module_(x); }
  Tensor operator()(const Tensor& x) { return module_(x); }
  Module& module() { return module_; }
  distributed::ProcessGroup& group() { return group_; }

  // Device marks (stage allreduce, comm stream) around each step's bucket all-reduces; null: none.
  void set_profiler(Profiler* profiler);

  // Off: backward leaves gradients local (accumulation micro-batches). On (default): backward reduces.
  void set_require_sync(bool on) { require_sync_ = on; }
  bool require_sync() const { return require_sync_; }

  // Launches whatever is not launched yet (parameters that got no gradient in this backward contribute
  // zeros), makes the compute stream wait for all buckets and sets each parameter's .grad to its averaged
  // slice. A no-op while require_sync() is off. Call once per optimizer step, after the last backward.
  void synchronize_gradients();

  // A participant of captured steps (runtime/capture.h; the step runner calls these): a capture that fails
  // (abort_capture) is abandoned and its sync and launches are uncounted, whatever point it failed at.
  // before_replay throws the process group's failure (BackendError) so no replay runs on a dead communicator;
  // after_replay counts the replayed round (the call counters advance as if it had been issued, without
  // timings) and lets the group's watchdog watch it.
  void begin_capture() override;
  void end_capture(std::vector<void*>* record_events) override;
  void abort_capture() noexcept override;
  void before_replay(std::vector<void*>* record_events) override;
  void after_replay() override;

  // In-place MAX across ranks, device-side on CUDA (the compute stream waits; no host read).
  void all_reduce_max(const Tensor& t);
  // Every rank skips the same steps: call after scaler.unscale_(optimizer), before scaler.step(optimizer).
  void sync_found_inf(const GradScaler& scaler);
  // Copies rank 0's buffers (batch-norm running statistics) to every rank, e.g. before a sharded evaluation.
  void broadcast_buffers();

  // Parameter indices (into module().parameters()) per bucket, in launch order.
  const std::vector<std::vector<size_t>>& buckets() const;
  // Resolves completed timings (never waits).
  DDPStats stats() const;
  void reset_stats();

  // RAII no_sync(): sync off for its lifetime, restored after.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.require_sync()) {
      ddp.set_require_sync(false);
    }
    ~NoSyncGuard() { ddp_.set_require_sync(previous_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };

  struct State;  // shared with the hooks, which outlive nothing: they hold a weak reference

 private:
  // Forgets the current round after a failed capture: buckets launched or
  // half-filled are dropped, the next backward starts a fresh round. Never throws.
  void abandon_round() noexcept;

  Module& module_;
  distributed::ProcessGroup& group_;
  bool require_sync_ = true;
  std::shared_ptr<State> state_;
};

// Sharded evaluation: each rank evaluates its shard, then the totals are summed over the group (a host read:
// evaluation is outside the training step). Loss is the sum of per-sample losses.
struct EvalTotals {
  int64_t correct = 0;
  int64_t count = 0;
  double loss_sum = 0.0;
};
EvalTotals all_reduce_eval(distributed::ProcessGroup& group, const EvalTotals& local);

// Every rank's `value`, indexed by rank, on every rank (a collective, outside the training step: it reads
// the result on the host). E.g. each rank's mean step time for the report.
std::vector<double> all_gather_value(distributed::ProcessGroup& group, double value);

}  // namespace liftoff
