#include "models/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "models/nn/layers.h"
#include "models/train/ema.h"
#include "ops/binary/binary.h"
#include "ops/cast/cast.h"
#include "ops/common/layout.h"
#include "ops/compare/compare.h"
#include "ops/flip/flip.h"
#include "ops/pad/pad.h"
#include "ops/reduce/reduce.h"
#include "ops/scale/scale.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/capture.h"
#include "runtime/config.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// f32 convolutions on CUDA run channels-last (ops/common/layout.h) and read their weight as KRSC: stored
// that way once (as PyTorch's model.to(memory_format=channels_last)), a step reads each weight without a
// transpose and its gradient arrives in the weight's layout (ResNet-18: 34 copy kernels a step fewer). Under
// autocast the half copies the convolutions read are made in KRSC by the batched weight cast already; f64
// convolutions run NCHW; DDP's buckets hold contiguous gradient slices. LIFTOFF_WEIGHT_LAYOUT=keep turns it
// off. +3.1% on ResNet-18 fp32 (session 25); WeightLayoutCuda trains both layouts to the same parameters.
bool store_weights_channels_last(const Module& model, const TrainerOptions& options) {
  if (options.amp != AmpMode::off || options.ddp != nullptr || conv_layout_follows_input()) return false;
  if (config::get_string(config::Knob::weight_layout).value_or("auto") != "auto") return false;
  bool any = false;
  for (const Tensor& p : model.parameters()) {
    if (!p.is_cuda() || p.dtype() == DType::f64) return false;
    any = any || (p.dim() == 4 && p.dtype() == DType::f32);
  }
  return any;
}

Device parameter_device(const Module& model) {
  const std::vector<Tensor> params = model.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

DType autocast_dtype_for(AmpMode mode) {
  return mode == AmpMode::off ? DType::f32 : amp_compute_dtype(mode);
}

// Top-1 hits of [N, classes] outputs against i64 class indices [N], as an f64 0-d tensor on the outputs'
// device (no host read: evaluation sums them over its batches and reads once); undefined for outputs of
// another form (a regression loss, say), whose accuracy is not defined.
Tensor count_correct(const Tensor& output, const Tensor& labels) {
  if (output.dim() != 2 || labels.dim() != 1 || labels.dtype() != DType::i64 ||
      labels.size(0) != output.size(0))
    return Tensor();
  return sum(cast(eq(argmax(output, 1), labels), DType::f64));
}

// a + b, where an undefined a counts as zero.
Tensor accumulate(const Tensor& total, const Tensor& value) {
  return total.defined() ? add(total, value) : value;
}

// The f32 logits of one view, averaged with its horizontal mirror's under hflip.
Tensor view_output(Module& model, const Tensor& input, bool hflip) {
  const Tensor plain = cast(model.forward(input), DType::f32);
  if (!hflip) return plain;
  return scale(add(plain, cast(model.forward(flip(input, {3})), DType::f32)), 0.5);
}

// [N, C, H, W] moved by one pixel along H and W (+1: down-right, -1: up-left), the edge replicated into
// the row and column that open.
Tensor shifted_by_one(const Tensor& input, int direction) {
  const Tensor widened = pad(input, {1, 1, 1, 1}, "replicate");
  return direction > 0 ? pad(widened, {0, -2, 0, -2}) : pad(widened, {-2, 0, -2, 0});
}

}  // namespace

namespace {
// GraphMode and BranchMode are both auto | on | off.
template <class Mode>
Mode parse_auto_on_off(const std::string& text, const char* flag) {
  if (text == "off") return Mode::off;
  if (text == "on") return Mode::on;
  if (text == "auto") return Mode::automatic;
  throw ValueError(str_cat(flag, ": '", text, "' is not one of auto, on, off"));
}

template <class Mode>
const char* auto_on_off_name(Mode mode) {
  switch (mode) {
    case Mode::off:
      return "off";
    case Mode::on:
      return "on";
    case Mode::automatic:
      return "auto";
  }
  return "?";
}
}  // namespace

GraphMode parse_graph_mode(const std::string& text) {
  return parse_auto_on_off<GraphMode>(text, "--cuda-graphs");
}
const char* graph_mode_name(GraphMode mode) {
  return auto_on_off_name(mode);
}
BranchMode parse_branch_mode(const std::string& text) {
  return parse_auto_on_off<BranchMode>(text, "--concurrent-micro-batches");
}
const char* branch_mode_name(BranchMode mode) {
  return auto_on_off_name(mode);
}

Trainer::Trainer(Module& model, Optimizer& optimizer, const LRSchedule* schedule, TrainerOptions options)
    : options_(std::move(options)),
      executor_(model, optimizer, schedule, options_),
      eager_(executor_),
      graph_(executor_, graph_status_) {
  LIFTOFF_CHECK(options_.accum >= 1, ValueError, "Trainer: accum must be >= 1, got ", options_.accum);
  LIFTOFF_CHECK(options_.max_concurrent_micro_batches >= 1 && options_.max_concurrent_micro_batches <= 16,
                ValueError, "Trainer: max_concurrent_micro_batches must be in 1..16, got ",
                options_.max_concurrent_micro_batches);
  if (options_.concurrent_micro_batches == BranchMode::on) {
    LIFTOFF_CHECK(
        options_.cuda_graphs != GraphMode::off && parameter_device(model).is_cuda(), ValueError,
        "--concurrent-micro-batches on: micro-batches overlap only inside a captured CUDA step; use "
        "--device cuda with --cuda-graphs auto or on, or --concurrent-micro-batches auto");
    const int64_t needed = options_.ddp ? 3 : 2;  // DDP's last micro-batch runs alone
    LIFTOFF_CHECK(options_.accum >= needed, ValueError,
                  "--concurrent-micro-batches on needs --accum >= ", needed,
                  options_.ddp ? " under DDP (its last micro-batch runs after the others)" : "",
                  ", got --accum ", options_.accum, "; use --concurrent-micro-batches auto");
  }
  // Lazily made state (batch-norm counters, cuDNN plans, optimizer buffers) must exist before a capture.
  LIFTOFF_CHECK(options_.graph_warmup_steps >= 1, ValueError,
                "Trainer: graph_warmup_steps must be >= 1 (eager steps before the capture), got ",
                options_.graph_warmup_steps);
  LIFTOFF_CHECK(options_.amp == AmpMode::off || parameter_device(model).is_cuda(), ValueError, "--amp ",
                amp_mode_name(options_.amp),
                " needs --device cuda: the CPU backend computes in f32/f64 only; use --amp off on the CPU");
  if (store_weights_channels_last(model, options_)) model.to(MemoryFormat::channels_last);
}

Trainer::~Trainer() = default;

Step Trainer::gather_step(BatchSource& source, EpochResult& result) {
  Step step;
  Batch batch;
  while (static_cast<int64_t>(step.micro_batches.size()) < options_.accum) {
    bool got = false;
    {
      Profiler::StageScope wait(options_.profiler, Stage::data_wait);
      got = source.next(batch);
    }
    if (!got) break;
    step.micro_batches.push_back({batch.input, batch.labels});
    ++result.micro_batches;
  }
  return step;
}

Tensor Trainer::run_step(const Step& step) {
  if (graph_.wants(step)) {
    if (std::optional<Tensor> loss = graph_.run(step)) return *loss;
  }
  // Eager: the graph does not take the step (warm-up, an epoch's tail, another shape) or its capture failed
  // (nothing of it ran; the reason is in the status).
  ++graph_status_.eager_steps;
  return *eager_.run(step);
}

EpochResult Trainer::train_epoch(BatchSource& source, int64_t epoch,
                                 const std::function<void(const StepProgress&)>& on_step,
                                 int64_t skip_micro_batches) {
  EpochResult result;
  result.epoch = epoch;
  const auto start = Clock::now();
  executor_.model().train();
  source.start_epoch(epoch);
  loss_sum_ = Tensor();
  loss_count_ = 0;
  Device device = Device::cpu();
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  Batch skipped;
  for (int64_t i = 0; i < skip_micro_batches && source.next(skipped); ++i) ++result.micro_batches;
  Profiler* prof = options_.profiler;
  while (!finished()) {
    if (prof) prof->begin_step();
    const Step step = gather_step(source, result);
    if (step.micro_batches.empty()) {
      if (prof) prof->abandon_step();  // the step opened before the final, empty next()
      break;
    }
    device = step.micro_batches.front().input.device();
    const int64_t images = step.images();
    accumulate_loss(loss_sum_, run_step(step));
    loss_count_ += static_cast<int64_t>(step.micro_batches.size());
    result.images += images;
    ++result.steps;
    if (loss_sum_.dtype() == DType::f32) recent_loss_.post(loss_sum_, 1.0 / static_cast<double>(loss_count_));
    if (on_step) {
      StepProgress p;
      p.epoch = epoch;
      p.micro_batch_in_epoch = result.micro_batches;
      p.micro_batches_per_epoch = source.batches_per_epoch();
      p.global_step = global_step();
      p.images = result.images;
      p.seconds = seconds_since(start);
      p.lr = executor_.optimizer().lr();
      on_step(p);
    }
    if (prof) prof->end_step(images);                      // after on_step: its prints count as "other"
    if (!tail_checked_) prepare_tail_shape(source, step);  // between steps: in no step's timing
  }
  graph_.release_if_disabled();  // no step is staged now
  synchronize(device);
  result.seconds = seconds_since(start);
  result.mean_loss = running_loss();
  result.stopped_early = finished();
  return result;
}

namespace {
// Every Dropout generator of a module tree: what a training forward draws from.
void collect_dropout_generators(Module& m, std::vector<Generator*>& out) {
  if (auto* d = dynamic_cast<Dropout*>(&m)) out.push_back(&d->generator());
  for (const auto& [name, child] : m.named_children()) collect_dropout_generators(*child, out);
}
}  // namespace

void Trainer::prepare_tail_shape(const BatchSource& source, const Step& step) {
  tail_checked_ = true;
  const int64_t rows = source.tail_batch_size();
  const MicroBatch& full = step.micro_batches.front();
  if (!options_.prepare_tail_shape || rows <= 0 || rows >= full.input.size(0)) return;
  Module& model = executor_.model();
  std::vector<Tensor> buffers = model.buffers();
  std::vector<Tensor> saved;
  for (const Tensor& b : buffers) saved.push_back(b.clone());
  // The rehearsal's dropout masks must not shift the run's random stream: a run with a tail batch draws
  // the same masks as one without.
  std::vector<Generator*> generators;
  collect_dropout_generators(model, generators);
  std::vector<uint64_t> offsets;
  for (const Generator* g : generators) offsets.push_back(g->offset());
  {
    // No all-reduce: every rank rehearses alone, and the gradients are dropped below.
    std::optional<DistributedDataParallel::NoSyncGuard> no_sync;
    if (options_.ddp) no_sync.emplace(*options_.ddp);
    const MicroBatch tail{full.input.slice(0, 0, rows).contiguous(),
                          full.labels.slice(0, 0, rows).contiguous()};
    const LossFn loss_fn = options_.loss ? options_.loss : cross_entropy_loss(options_.label_smoothing);
    loss_fn(model.forward(tail.input), tail).backward();
  }
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(saved[i]);
  for (size_t i = 0; i < generators.size(); ++i) generators[i]->set_state(generators[i]->seed(), offsets[i]);
  prepared_tail_rows_ = rows;
}

double Trainer::running_loss() const {
  if (!loss_sum_.defined() || loss_count_ == 0) return 0.0;
  return loss_sum_.item() / static_cast<double>(loss_count_);
}

Tensor test_time_logits(Module& model, const Tensor& input, const EvalOptions& options) {
  if (!options.hflip && !options.shift) return cast(model.forward(input), DType::f32);
  LIFTOFF_CHECK(input.dim() == 4, ShapeError, "evaluate: test-time ",
                options.shift ? "translation (--tta-shift)" : "flip averaging (--tta-flip)",
                " needs image batches [N, C, H, W], got ", shape_str(input.shape()),
                "; leave the flag out for this data");
  const Tensor centred = view_output(model, input, options.hflip);
  if (!options.shift) return centred;
  const Tensor moved = add(view_output(model, shifted_by_one(input, +1), options.hflip),
                           view_output(model, shifted_by_one(input, -1), options.hflip));
  return add(scale(centred, 0.5), scale(moved, 0.25));
}

EvalResult Trainer::evaluate(BatchSource& source, const EvalOptions& options) {
  ModelEma* ema = options.use_ema ? options_.ema : nullptr;
  if (ema == nullptr) return evaluate_pass(source, options);
  ema->swap_with_model();  // in place: a captured step keeps its addresses
  try {
    const EvalResult result = evaluate_pass(source, options);
    ema->swap_with_model();
    return result;
  } catch (...) {
    ema->swap_with_model();
    throw;
  }
}

EvalResult Trainer::evaluate_pass(BatchSource& source, const EvalOptions& options) {
  EvalResult result;
  const auto start = Clock::now();
  NoGradGuard no_grad;
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  if (options_.ddp) options_.ddp->broadcast_buffers();  // every rank evaluates rank 0's running statistics
  Module& model = executor_.model();
  model.eval();
  source.start_epoch(0);
  const LossFn loss_fn = options_.loss ? options_.loss : cross_entropy_loss(0.0);
  // Summed on the device and read once at the end: a host read per batch would stop the host from
  // queueing the next batch's forwards while the device runs this one's.
  Tensor loss_sum, correct_sum;
  Batch batch;
  int64_t full_rows = 0;
  while (source.next(batch)) {
    const MicroBatch mb{batch.input, batch.labels};
    if (full_rows == 0) full_rows = mb.input.size(0);
    // The last, smaller batch is a shape that runs once an evaluation: self-tuning ops guess rather than
    // time.
    const QuickTuningScope quick_tuning(mb.input.size(0) < full_rows);
    const Tensor output = test_time_logits(model, mb.input, options);
    const int64_t n = output.size(0);
    loss_sum = accumulate(loss_sum, scale(cast(loss_fn(output, mb), DType::f64), static_cast<double>(n)));
    const Tensor hits = count_correct(output, mb.labels);
    if (hits.defined()) correct_sum = accumulate(correct_sum, hits);
    result.images += n;
  }
  model.train();
  double loss_total = loss_sum.defined() ? loss_sum.item() : 0.0;
  int64_t correct = correct_sum.defined() ? static_cast<int64_t>(std::llround(correct_sum.item())) : 0;
  if (options_.group) {
    const EvalTotals totals = all_reduce_eval(*options_.group, {correct, result.images, loss_total});
    correct = totals.correct;
    result.images = totals.count;
    loss_total = totals.loss_sum;
  }
  if (result.images > 0) {
    result.mean_loss = loss_total / static_cast<double>(result.images);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.images);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace liftoff
