// Trainer: the training loop shared by tools/train and embedding programs. It ties a model, an optimizer, an
// LR schedule and a BatchSource together, with gradient accumulation. Inside an optimizer step nothing reads
// device values on the host: the loss is summed on the device and read only when the caller asks.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_iterator.h"
#include "models/train/amp.h"
#include "models/train/ddp.h"
#include "models/nn/module.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "runtime/async_scalar.h"
#include "runtime/graph.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

// Whole-step CUDA graphs (runtime/graph.h). auto: captured after graph_warmup_steps eager steps when the
// step allows it (CUDA device, an optimizer that reads its LR on the device, no host random
// draws), eager otherwise with the reason recorded; on: the same, but a step that cannot be captured is an
// error; off: always eager. A micro-batch whose shapes differ from the captured ones (the last, partial
// batch of an epoch) runs eagerly.
enum class GraphMode { off, on, automatic };
GraphMode parse_graph_mode(const std::string& text);  // "off", "on", "auto"; ValueError otherwise
const char* graph_mode_name(GraphMode mode);

// Micro-batches of a captured step on concurrent streams (runtime/branches.h). With accumulation, a step's
// micro-batches are independent until their gradients are summed: each runs on a stream of its own, so the
// small kernels of a small batch share the GPU instead of queuing behind each other. The sums, batch-norm
// running statistics and losses come out as with one stream (same additions, same order). With gradient
// hooks (DDP) the last micro-batch runs after the others joined, so the hooks see complete gradients. auto:
// when the step is captured as a CUDA graph, at least two micro-batches can overlap, and the extra
// activation memory (estimated from the peak so far) fits in half the free device memory, falling back to
// one stream when the concurrent capture fails (out of memory, say); on: the same without the memory
// estimate; off: one stream.
enum class BranchMode { off, on, automatic };
BranchMode parse_branch_mode(const std::string& text);  // "off", "on", "auto"; ValueError otherwise
const char* branch_mode_name(BranchMode mode);

// What happened to CUDA graphs in a run, for the report.
struct GraphStatus {
  GraphMode mode = GraphMode::off;
  bool used = false;              // a step was captured and replayed
  std::string reason;             // why graphs were not used (or stopped being used); empty when they were
  int64_t captured_at_step = -1;  // the optimizer step (global) that was captured
  int64_t graph_steps = 0;        // optimizer steps run by the graph (the captured one included)
  int64_t eager_steps = 0;        // optimizer steps run eagerly (warm-up, partial batches, fallbacks)
  int64_t nodes = 0;              // nodes in the captured graph
  int64_t streams = 1;            // concurrent streams the captured step's micro-batches ran on
  std::string streams_reason;     // why the micro-batches did not run concurrently (empty when they did)
};

struct TrainerOptions {
  int64_t accum = 1;             // micro-batches per optimizer step; the loss is scaled by 1/accum
  double label_smoothing = 0.0;  // cross-entropy label smoothing
  int64_t max_steps = -1;        // stop after this many optimizer steps in total (-1: no limit)
  AmpMode amp =
      AmpMode::off;         // bf16/fp16: autocast conv/linear, f32 loss, batch-norm statistics and optimizer
  double loss_scale = 0.0;  // fp16: a static loss scale (> 0) instead of the dynamic GradScaler
  // Drop optimizer steps whose gradients hold inf/NaN (decided on the device, counted by the scaler) instead
  // of applying them; fp16 always does this.
  bool skip_nonfinite_steps = false;
  // Data-parallel training: gradients are all-reduced on the last micro-batch of each optimizer step only,
  // and evaluation totals are summed over the ranks. Both null for a single process.
  DistributedDataParallel* ddp = nullptr;
  distributed::ProcessGroup* group = nullptr;
  // Stage timing for the utilization report (host clocks + CUDA events resolved late); null: not measured.
  Profiler* profiler = nullptr;
  // Off by default in the library: a custom op launching work on a stream of its own would be left out of
  // the graph. tools/train defaults to auto (its models are known to capture).
  GraphMode cuda_graphs = GraphMode::off;
  int64_t graph_warmup_steps = 3;  // eager optimizer steps before the capture (>= 1: cuDNN plans, state)
  BranchMode concurrent_micro_batches = BranchMode::automatic;  // see BranchMode
  int max_concurrent_micro_batches = 8;                         // streams at most (1..16)
};

struct StepProgress {
  int64_t epoch = 0;
  int64_t micro_batch_in_epoch = 0;  // micro-batches done in this epoch
  int64_t micro_batches_per_epoch = 0;
  int64_t global_step = 0;  // optimizer steps done so far
  int64_t images = 0;       // training images seen this epoch
  double seconds = 0.0;     // wall time of this epoch so far
  double lr = 0.0;
};

struct EpochResult {
  int64_t epoch = 0;
  int64_t steps = 0;  // optimizer steps taken in this epoch
  int64_t micro_batches = 0;
  int64_t images = 0;
  double seconds = 0.0;        // wall time including the final device synchronisation
  double mean_loss = 0.0;      // mean of the (unscaled) micro-batch losses
  bool stopped_early = false;  // max_steps reached
};

struct EvalResult {
  int64_t images = 0;
  double mean_loss = 0.0;
  double accuracy = 0.0;  // fraction in [0, 1]
  double seconds = 0.0;
};

class Trainer {
 public:
  // schedule may be null (constant learning rate). The model and optimizer must outlive the trainer.
  // With DDP and CUDA graphs, destroy the Trainer (it owns the graph, which holds captured collectives)
  // before the process group.
  Trainer(Module& model, Optimizer& optimizer, const LRSchedule* schedule, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs one epoch of `source`; on_step runs after every optimizer step (cheap: it must not sync the device
  // unless it wants to, e.g. running_loss()).
  // skip_micro_batches: resume inside an epoch (the first batches are drawn and dropped: the data order and
  // augmentation are pure functions of seed, epoch and sample index, so the rest is what the run would see).
  EpochResult train_epoch(BatchSource& source, int64_t epoch,
                          const std::function<void(const StepProgress&)>& on_step = nullptr,
                          int64_t skip_micro_batches = 0);
  // Loss and top-1 accuracy over one pass of `source` in eval mode, without autograd.
  EvalResult evaluate(BatchSource& source);

  // Mean micro-batch loss of the current epoch so far; reads the device (synchronises).
  double running_loss() const;
  // The same mean as of a recent optimizer step, read without waiting for the device (copied asynchronously
  // after each step); false until one has arrived. For progress lines.
  bool recent_loss(double* loss) { return recent_loss_.latest(loss); }
  int64_t global_step() const { return global_step_; }
  GradScaler& scaler() { return scaler_; }
  const TrainerOptions& options() const { return options_; }
  bool finished() const {
    return stop_requested_ || (options_.max_steps >= 0 && global_step_ >= options_.max_steps);
  }
  // Ends train_epoch after the current optimizer step (signals, NaN checks); safe to call from on_step.
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }
  // Resume: the optimizer steps already done (drives the LR schedule and max_steps).
  void set_global_step(int64_t step) { global_step_ = step; }
  const GraphStatus& graph_status() const { return graph_status_; }

 private:
  // DDP: the gradient all-reduce of the step (after its last backward, before the optimizer); no-op alone.
  void synchronize_gradients();
  void optimizer_step(bool set_lr = true);
  // Forward + backward of one micro-batch (index_in_step: 0 for a step's first), timed; returns the detached
  // f32 loss.
  // leave_in_grad: the micro-batch's gradients stay in .grad for the caller (concurrent micro-batches).
  Tensor run_micro_batch(const Tensor& input, const Tensor& labels, int64_t index_in_step,
                         bool completes_step, bool leave_in_grad = false);
  // Gradient accumulation over micro-batches: autograd adds each parameter's gradient into .grad with a
  // kernel of its own (about 60 per ResNet-20 micro-batch). A step's micro-batches after the first instead
  // leave fresh gradients, which one multi-tensor launch adds into the step's sums (grad_sums_); the
  // optimizer step gets the sums back in .grad. With gradient-ready hooks (DDP) the last micro-batch gets
  // them back before its backward and accumulates as usual, so the hooks see complete gradients. Same
  // additions in the same order: identical results, fewer graph nodes.
  bool grad_hooks_present() const;
  void move_gradients_to_sums();
  void add_gradients_to_sums();
  void restore_gradient_sums();
  // Graphs: whether this step's micro-batches go into the static inputs (decided at its first micro-batch).
  // step_start: the step's first micro-batch (only then may the static inputs be reallocated).
  bool graph_step_wanted(const Batch& batch, bool step_start);
  void disable_graphs(const std::string& reason);
  void stage_static_input(int64_t slot, const Batch& batch);
  // Runs staged micro-batches eagerly (a shape change mid-step, a failed capture, the tail of an epoch).
  Tensor run_staged_eagerly(int64_t count);
  // Runs the step's staged micro-batches on `lanes` concurrent streams (into the step's gradient sums) and
  // returns their loss sum; the compute stream has joined them on return.
  Tensor run_staged_concurrently(int lanes);
  // Streams for the capture's micro-batches (1: one after another), with the reason when 1.
  int capture_lanes(std::string* why) const;
  // DDP: throws the process group's failure (BackendError) before a replay would run on a dead
  // communicator, dropping the graph.
  void check_group_before_replay();
  // Captures the step on its first call, replays afterwards; false when the capture failed (nothing ran).
  bool run_graph_step();

  Module& model_;
  Optimizer& optimizer_;
  const LRSchedule* schedule_;
  TrainerOptions options_;
  GradScaler scaler_;
  int64_t global_step_ = 0;
  bool stop_requested_ = false;
  Tensor loss_sum_;                // device-side sum of micro-batch losses this epoch
  std::vector<Tensor> grad_sums_;  // per parameter: this step's gradient sum while .grad is fresh (or empty)
  AsyncScalar recent_loss_;
  int64_t loss_count_ = 0;

  GraphStatus graph_status_;
  bool graphs_possible_ = true;  // false once disabled (the reason is in graph_status_)
  std::unique_ptr<CudaGraph> graph_;
  std::vector<Tensor> static_inputs_, static_labels_;  // one per micro-batch of a step, read by the graph
  Tensor graph_step_loss_;     // written by each replay: the sum of the step's micro-batch losses
  int64_t largest_batch_ = 0;  // rows of the largest micro-batch seen: the shape a capture uses
};

}  // namespace liftoff
