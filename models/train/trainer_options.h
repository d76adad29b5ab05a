// What a Trainer is told (TrainerOptions) and what it reports about CUDA graphs (GraphStatus); shared by the
// Trainer and its step runners.
#pragma once
#include <cstdint>
#include <string>

#include "models/train/amp.h"
#include "models/train/ddp.h"
#include "models/train/step.h"
#include "runtime/distributed/process_group.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

class ModelEma;  // models/train/ema.h

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
  double label_smoothing = 0.0;  // cross-entropy label smoothing (the default loss)
  // The loss of a micro-batch from the model output (any function of output and micro-batch returning a
  // scalar tensor; it runs inside captured steps, so no host reads). Empty:
  // cross_entropy_loss(label_smoothing).
  LossFn loss;
  int64_t max_steps = -1;  // stop after this many optimizer steps in total (-1: no limit)
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
  // Captured by default, in the library as in tools/train: a step that cannot be captured (CPU, an optimizer
  // that reads its LR on the host, a capture that fails, e.g. an op that syncs the host) runs eagerly with
  // the reason in graph_status(). Set off for a model whose custom ops launch work on streams of their own
  // (that work would be left out of the graph).
  GraphMode cuda_graphs = GraphMode::automatic;
  int64_t graph_warmup_steps = 3;  // eager optimizer steps before the capture (>= 1: cuDNN plans, state)
  // An epoch's last, smaller batch (BatchSource::tail_batch_size) has a shape of its own: after the first
  // step the Trainer runs forward and backward once at that shape and undoes it (gradients dropped, buffers
  // such as batch-norm statistics restored), so its cuDNN algorithm searches and allocations happen during
  // the warm-up, not inside the measured steps at each epoch's end. Off: the tail pays them when it comes.
  bool prepare_tail_shape = true;
  BranchMode concurrent_micro_batches = BranchMode::automatic;  // see BranchMode
  int max_concurrent_micro_batches = 8;                         // streams at most (1..16)
  // Updated after every optimizer step, inside the step (and its CUDA graph); evaluate() uses its weights.
  // Null: no EMA. Must outlive the Trainer.
  ModelEma* ema = nullptr;
};

}  // namespace liftoff
