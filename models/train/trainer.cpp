#include "models/train/trainer.h"

#include <algorithm>
#include <utility>

#include "runtime/autocast.h"
#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/optimizer_step/optimizer_step.h"
#include "ops/scale/scale.h"
#include "runtime/autograd.h"
#include "runtime/branches.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Device parameter_device(const Module& model) {
  const std::vector<Tensor> params = model.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

DType autocast_dtype_for(AmpMode mode) {
  return mode == AmpMode::off ? DType::f32 : amp_compute_dtype(mode);
}

// sum += value, where an undefined sum starts as a copy of value (device-side, no sync).
void add_to(Tensor& sum, const Tensor& value) {
  if (!sum.defined()) {
    sum = value.clone();
  } else {
    accumulate_into(sum, value);
  }
}

GradScaler make_scaler(const TrainerOptions& o, Device device) {
  // A fixed scale of 1 is the GradScaler's inf/NaN check and step skip without any scaling.
  if (o.skip_nonfinite_steps && o.amp != AmpMode::fp16) return GradScaler::fixed(1.0, device);
  return GradScaler::for_mode(o.amp, device, o.loss_scale);
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
    : model_(model),
      optimizer_(optimizer),
      schedule_(schedule),
      options_(options),
      scaler_(make_scaler(options, parameter_device(model))) {
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
  graph_status_.mode = options_.cuda_graphs;
  if (options_.cuda_graphs == GraphMode::off) graph_status_.reason = "--cuda-graphs off";
  if (options_.ddp) options_.ddp->set_profiler(options_.profiler);
  LIFTOFF_CHECK(options_.amp == AmpMode::off || parameter_device(model).is_cuda(), ValueError, "--amp ",
                amp_mode_name(options_.amp),
                " needs --device cuda: the CPU backend computes in f32/f64 only; use --amp off on the CPU");
}

void Trainer::synchronize_gradients() {
  restore_gradient_sums();  // a short tail ends without the micro-batch that would
  if (!options_.ddp) return;
  // Host time of the call (CPU/MPI: the wait itself); on CUDA the device-side wait falls between the
  // backward and optimizer marks, where the allreduce mark on the comm stream shows what is exposed.
  Profiler::StageScope host(options_.profiler, Stage::allreduce);
  options_.ddp->set_require_sync(true);
  options_.ddp->synchronize_gradients();  // the compute stream waits on the buckets, the host does not
}

void Trainer::optimizer_step(bool set_lr) {
  restore_gradient_sums();
  if (schedule_ && set_lr) optimizer_.set_lr(schedule_->lr_at(global_step_));
  if (options_.ddp && scaler_.enabled()) {
    scaler_.unscale_(optimizer_);
    options_.ddp->sync_found_inf(scaler_);  // every rank skips the same steps
  }
  // Unscales, checks for inf/NaN and skips the update on the device (fp16); a plain step otherwise.
  scaler_.step(optimizer_);
  scaler_.update();
  optimizer_.zero_grad();
  advance_weight_version();  // autocast's half weights are stale now
  ++global_step_;
}

bool Trainer::grad_hooks_present() const {
  if (options_.ddp) return true;
  for (const Tensor& p : model_.parameters()) {
    if (!p.impl().grad_ready_hooks.empty()) return true;
  }
  return false;
}

void Trainer::move_gradients_to_sums() {
  if (!grad_sums_.empty()) return;  // already there, .grad holds fresh gradients or none
  for (const Tensor& p : model_.parameters()) {
    grad_sums_.push_back(p.grad());
    p.set_grad(Tensor());
  }
}

void Trainer::add_gradients_to_sums() {
  const std::vector<Tensor> params = model_.parameters();
  LIFTOFF_CHECK(params.size() == grad_sums_.size(), ValueError, "Trainer: the model has ", params.size(),
                " parameters but ", grad_sums_.size(), " gradient sums (parameters changed mid-step?)");
  std::vector<Tensor> fresh;
  for (size_t i = 0; i < params.size(); ++i) {
    fresh.push_back(params[i].grad());
    params[i].set_grad(Tensor());
    // A parameter first reached in this micro-batch starts its sum here.
    if (!grad_sums_[i].defined()) grad_sums_[i] = std::exchange(fresh[i], Tensor());
  }
  accumulate_gradients(grad_sums_, fresh);
}

void Trainer::restore_gradient_sums() {
  if (grad_sums_.empty()) return;
  const std::vector<Tensor> params = model_.parameters();
  for (size_t i = 0; i < params.size() && i < grad_sums_.size(); ++i) {
    LIFTOFF_CHECK(!params[i].grad().defined(), ValueError, "Trainer: parameter ", i,
                  " has a gradient outside the step's accumulation");
    params[i].set_grad(grad_sums_[i]);
  }
  grad_sums_.clear();
}

Tensor Trainer::run_micro_batch(const Tensor& input, const Tensor& labels, int64_t index_in_step,
                                bool completes_step, bool leave_in_grad) {
  Profiler* prof = options_.profiler;
  // Eager steps before a capture: first-use tuning (cuDNN searches) targets the replayed graph.
  const GraphWarmupScope warmup(input.is_cuda() && graphs_possible_ &&
                                options_.cuda_graphs != GraphMode::off);
  Tensor loss;
  {
    Profiler::StageScope host(prof, Stage::forward);
    Profiler::DeviceScope dev(prof, Stage::forward);
    // The loss (log-softmax) is computed in f32 whatever the autocast dtype of the logits.
    const Tensor logits = cast(model_.forward(input), DType::f32);
    loss = cross_entropy(logits, labels, options_.label_smoothing);
  }
  {
    Profiler::StageScope host(prof, Stage::backward);
    Profiler::DeviceScope dev(prof, Stage::backward);
    // DDP communicates only on the micro-batch that completes an optimizer step.
    if (options_.ddp) options_.ddp->set_require_sync(completes_step);
    const double micro_scale = 1.0 / static_cast<double>(options_.accum);
    // The step's last micro-batch adds into the sums too, unless gradient-ready hooks (DDP's all-reduce) must
    // see the complete gradient in .grad when autograd reaches each parameter.
    const bool into_sums = !leave_in_grad && index_in_step >= 1 && (!completes_step || !grad_hooks_present());
    if (into_sums) {
      move_gradients_to_sums();
    } else if (!leave_in_grad) {
      restore_gradient_sums();
    }
    scaler_.scale(options_.accum > 1 ? scale(loss, micro_scale) : loss).backward();
    if (into_sums) add_gradients_to_sums();
  }
  return loss.detach();
}

void Trainer::disable_graphs(const std::string& reason) {
  graphs_possible_ = false;
  graph_status_.reason = reason;
  graph_.reset();
  graph_step_loss_ = Tensor();
  // static_inputs_ stay until the epoch ends: a step staged there runs eagerly from them.
}

bool Trainer::graph_step_wanted(const Batch& batch, bool step_start) {
  if (options_.cuda_graphs == GraphMode::off || !graphs_possible_) return false;
  if (!graph_) {  // the first time: can this run capture at all?
    std::string why;
    if (!batch.input.device().is_cuda()) {
      why = str_cat("the step runs on ", batch.input.device().str(), " (CUDA graphs need --device cuda)");
    } else if (!optimizer_.prepare_for_graph_capture(&why)) {
      // why is set by the optimizer
    }
    if (!why.empty()) {
      LIFTOFF_CHECK(options_.cuda_graphs != GraphMode::on, ValueError, "--cuda-graphs on: ", why,
                    "; use --cuda-graphs auto or off");
      disable_graphs(why);
      return false;
    }
    graph_ = std::make_unique<CudaGraph>(batch.input.device());
  }
  largest_batch_ = std::max(largest_batch_, batch.input.size(0));
  if (!graph_->ready()) {
    if (graph_status_.eager_steps < options_.graph_warmup_steps) return false;
    // Capture a full batch, never an epoch's short last one (full steps would then all run eagerly).
    if (batch.input.size(0) < largest_batch_) return false;
    const bool other_shape = !static_inputs_.empty() && (batch.input.shape() != static_inputs_[0].shape() ||
                                                         batch.labels.shape() != static_labels_[0].shape());
    if (other_shape) {
      if (!step_start) return false;  // slots of this step hold staged micro-batches
      static_inputs_.clear();         // nothing captured reads them yet
      static_labels_.clear();
    }
  }
  if (static_inputs_.empty()) {
    for (int64_t k = 0; k < options_.accum; ++k) {
      static_inputs_.push_back(Tensor::empty(batch.input.shape(), batch.input.dtype(), batch.input.device()));
      static_labels_.push_back(
          Tensor::empty(batch.labels.shape(), batch.labels.dtype(), batch.labels.device()));
    }
  }
  return batch.input.shape() == static_inputs_[0].shape() &&
         batch.labels.shape() == static_labels_[0].shape() &&
         batch.input.dtype() == static_inputs_[0].dtype() &&
         batch.labels.dtype() == static_labels_[0].dtype();
}

void Trainer::stage_static_input(int64_t slot, const Batch& batch) {
  // Part of getting the batch to the step (a device-to-device copy of microseconds): counted as data wait on
  // the host, and without a device mark, so "h2d" keeps meaning the loader's host-to-device copies.
  Profiler::StageScope host(options_.profiler, Stage::data_wait);
  static_inputs_[static_cast<size_t>(slot)].copy_(batch.input);
  static_labels_[static_cast<size_t>(slot)].copy_(batch.labels);
}

Tensor Trainer::run_staged_eagerly(int64_t count) {
  Tensor step_loss;
  for (int64_t k = 0; k < count; ++k) {
    add_to(step_loss, run_micro_batch(static_inputs_[static_cast<size_t>(k)],
                                      static_labels_[static_cast<size_t>(k)], k, k + 1 == options_.accum));
  }
  return step_loss;
}

Tensor Trainer::run_staged_concurrently(int lanes) {
  const std::vector<Tensor> params = model_.parameters();
  const size_t count = static_cast<size_t>(options_.accum);
  // Gradient hooks (DDP's all-reduce) must see the complete gradient: the last micro-batch runs after the
  // others have joined, accumulating through autograd as with one stream.
  const size_t overlapped = grad_hooks_present() ? count - 1 : count;
  std::vector<Tensor> losses(count);
  std::vector<std::vector<Tensor>> fresh(overlapped);  // micro-batch k >= 1: its own gradients
  {
    ConcurrentBranches branches(static_inputs_[0].device(), lanes);
    for (size_t k = 0; k < overlapped; ++k) {
      branches.enter(static_cast<int>(k));
      // The first micro-batch accumulates into .grad as with one stream; the others start from none.
      losses[k] =
          run_micro_batch(static_inputs_[k], static_labels_[k], static_cast<int64_t>(k), k + 1 == count,
                          /*leave_in_grad=*/true);
      if (k == 0) {
        move_gradients_to_sums();
      } else {
        for (const Tensor& p : params) {
          fresh[k].push_back(p.grad());
          p.set_grad(Tensor());
        }
      }
    }
    branches.join();
  }
  // On the compute stream, in micro-batch order: the additions one stream makes, in the same order.
  for (size_t k = 1; k < overlapped; ++k) {
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(fresh[k][i]);
    fresh[k].clear();
    add_gradients_to_sums();
  }
  if (overlapped < count) {
    losses[count - 1] = run_micro_batch(static_inputs_[count - 1], static_labels_[count - 1],
                                        static_cast<int64_t>(count - 1), /*completes_step=*/true);
  }
  Tensor step_loss;
  for (const Tensor& loss : losses) add_to(step_loss, loss);
  return step_loss;
}

int Trainer::capture_lanes(std::string* why) const {
  // With gradient hooks (DDP) the last micro-batch runs after the others (run_staged_concurrently).
  const int64_t overlapped = grad_hooks_present() ? options_.accum - 1 : options_.accum;
  const int lanes = static_cast<int>(std::min<int64_t>(overlapped, options_.max_concurrent_micro_batches));
  if (options_.concurrent_micro_batches == BranchMode::off) {
    *why = "--concurrent-micro-batches off";
  } else if (options_.accum < 2) {
    *why = "one micro-batch per step";
  } else if (overlapped < 2) {
    *why =
        "with DDP the last micro-batch runs alone (its gradient hooks need the complete sums): --accum 2 "
        "leaves one to overlap";
  } else if (lanes < 2) {
    *why = "at most one stream allowed";
  } else if (options_.concurrent_micro_batches == BranchMode::automatic) {
    const BranchMemory m = branch_memory(static_inputs_[0].device());
    const double extra = static_cast<double>(lanes - 1) * static_cast<double>(m.peak_allocated);
    if (extra > 0.5 * static_cast<double>(m.free_bytes)) {
      *why = str_cat("the extra activation memory (about ", static_cast<int64_t>(extra / (1 << 20)),
                     " MiB for ", lanes, " streams) would not fit in half the free device memory (",
                     m.free_bytes / (1 << 20), " MiB)");
    }
  }
  return why->empty() ? lanes : 1;
}

void Trainer::check_group_before_replay() {
  if (!options_.ddp) return;
  try {
    options_.ddp->group().check_healthy();
  } catch (...) {
    // The communicator was aborted (a peer died or hung): no replay is launched on it, and the graph, which
    // holds the communicator's captured work (NCCL finishes an abort only once such graphs are gone), goes.
    graph_.reset();
    graphs_possible_ = false;
    graph_status_.reason = "the process group failed";
    throw;
  }
}

Trainer::~Trainer() {
  if (options_.ddp) options_.ddp->set_profiler(nullptr);  // the profiler may go before the DDP wrapper
}

bool Trainer::run_graph_step() {
  Profiler* prof = options_.profiler;
  // The learning rate goes to the device before the graph, which reads it there.
  if (schedule_) optimizer_.set_lr(schedule_->lr_at(global_step_));
  if (graph_->ready()) {
    check_group_before_replay();
    graph_->replay(prof ? prof->replay_graph_marks() : std::vector<void*>{});
    if (options_.ddp) {
      options_.ddp->count_replayed_round();
      options_.ddp->group().watch_graph_replay("all-reduce in the captured training step");
    }
    advance_weight_version();  // what the captured optimizer_step does on the host
    ++global_step_;
    ++graph_status_.graph_steps;
    add_to(loss_sum_, graph_step_loss_);
    return true;
  }
  const int64_t step_before = global_step_;
  // The capture must record the casts of the half-precision weights: copies cached outside it (e.g. by an
  // evaluation since the last optimizer step) would be read, frozen, by every replay.
  advance_weight_version();
  // Nothing captured ran: undo the host-side effects of the half-recorded step.
  auto roll_back = [&] {
    graph_->abort_capture();
    if (prof) prof->abort_graph_capture();
    global_step_ = step_before;
    grad_sums_.clear();
    optimizer_.zero_grad();
    scaler_.abandon_step();
    if (options_.ddp) options_.ddp->end_graph_capture(/*succeeded=*/false);
    advance_weight_version();
  };
  std::string one_stream_why;
  int lanes = capture_lanes(&one_stream_why);
  if (lanes > 1) {
    try {
      prepare_concurrent_lanes(static_inputs_[0].device(), lanes);  // streams, handles: not while capturing
    } catch (const Error& e) {
      if (options_.concurrent_micro_batches == BranchMode::on) throw;
      one_stream_why = str_cat("preparing ", lanes, " streams failed: ", e.what());
      lanes = 1;
    }
  }
  try {
    if (options_.ddp) options_.ddp->begin_graph_capture();
    if (prof) prof->begin_graph_capture();
    graph_->begin_capture();
    Tensor step_loss = lanes > 1 ? run_staged_concurrently(lanes) : run_staged_eagerly(options_.accum);
    synchronize_gradients();
    {
      Profiler::StageScope host(prof, Stage::optimizer);
      Profiler::DeviceScope dev(prof, Stage::optimizer);
      optimizer_step(/*set_lr=*/false);
    }
    graph_->end_capture(prof ? prof->end_graph_capture() : std::vector<void*>{});
    if (options_.ddp) options_.ddp->end_graph_capture(/*succeeded=*/true);
    graph_step_loss_ = step_loss;
  } catch (const Error& e) {
    roll_back();
    // A concurrent capture that failed (its activations did not fit, say) is tried again on one stream.
    if (lanes > 1 && options_.concurrent_micro_batches == BranchMode::automatic) {
      graph_status_.streams_reason = str_cat("the capture on ", lanes, " streams failed: ", e.what());
      options_.concurrent_micro_batches = BranchMode::off;
      return run_graph_step();
    }
    if (dynamic_cast<const GraphCaptureError*>(&e) != nullptr) {
      LIFTOFF_CHECK(options_.cuda_graphs != GraphMode::on, GraphCaptureError, "--cuda-graphs on: ", e.what());
    } else if (options_.cuda_graphs == GraphMode::on) {
      throw;  // keeps its type (e.g. OutOfMemoryError)
    }
    disable_graphs(str_cat("capture failed: ", e.what()));
    return false;
  } catch (...) {
    roll_back();  // leave no capture open behind a foreign exception
    throw;
  }
  check_group_before_replay();
  graph_->replay();  // the first launch records the capture's own events
  if (options_.ddp) options_.ddp->group().watch_graph_replay("all-reduce in the captured training step");
  graph_status_.used = true;
  graph_status_.captured_at_step = step_before;
  graph_status_.nodes = static_cast<int64_t>(graph_->num_nodes());
  graph_status_.streams = lanes;
  if (graph_status_.streams_reason.empty()) graph_status_.streams_reason = one_stream_why;
  ++graph_status_.graph_steps;
  add_to(loss_sum_, graph_step_loss_);
  return true;
}

EpochResult Trainer::train_epoch(BatchSource& source, int64_t epoch,
                                 const std::function<void(const StepProgress&)>& on_step,
                                 int64_t skip_micro_batches) {
  EpochResult result;
  result.epoch = epoch;
  const auto start = Clock::now();
  model_.train();
  source.start_epoch(epoch);
  loss_sum_ = Tensor();
  loss_count_ = 0;
  int64_t pending = 0;  // micro-batches accumulated since the last optimizer step
  bool staged = false;  // this step's micro-batches are staged in the static inputs (graph step)
  Tensor step_loss;     // eager: sum of this step's micro-batch losses so far
  Device device = Device::cpu();
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  Batch batch;
  for (int64_t i = 0; i < skip_micro_batches && source.next(batch); ++i) ++result.micro_batches;
  Profiler* prof = options_.profiler;
  int64_t step_images = 0;
  auto eager_optimizer_step = [&] {
    if (staged) step_loss = run_staged_eagerly(pending);
    staged = false;
    synchronize_gradients();
    {
      Profiler::StageScope host(prof, Stage::optimizer);
      Profiler::DeviceScope dev(prof, Stage::optimizer);
      optimizer_step();
    }
    add_to(loss_sum_, step_loss);
    step_loss = Tensor();
    ++graph_status_.eager_steps;
  };
  while (!finished()) {
    if (prof) prof->begin_step();
    bool got = false;
    {
      Profiler::StageScope wait(prof, Stage::data_wait);
      got = source.next(batch);
    }
    if (!got) break;
    device = batch.input.device();
    if (pending == 0) {
      staged = graph_step_wanted(batch, /*step_start=*/true);
    } else if (staged && !graph_step_wanted(batch, /*step_start=*/false)) {
      // A shape change inside a staged step: what was staged runs eagerly, and so does the rest.
      step_loss = run_staged_eagerly(pending);
      staged = false;
    }
    if (staged) {
      stage_static_input(pending, batch);
    } else {
      add_to(step_loss, run_micro_batch(batch.input, batch.labels, pending, pending + 1 == options_.accum));
    }
    ++loss_count_;
    ++pending;
    ++result.micro_batches;
    result.images += batch.input.size(0);
    step_images += batch.input.size(0);
    if (pending == options_.accum) {
      const bool graphed = staged && run_graph_step();
      if (graphed) {
        staged = false;
      } else {
        eager_optimizer_step();
      }
      pending = 0;
      ++result.steps;
      if (loss_sum_.dtype() == DType::f32)
        recent_loss_.post(loss_sum_, 1.0 / static_cast<double>(loss_count_));
      if (on_step) {
        StepProgress p;
        p.epoch = epoch;
        p.micro_batch_in_epoch = result.micro_batches;
        p.micro_batches_per_epoch = source.batches_per_epoch();
        p.global_step = global_step_;
        p.images = result.images;
        p.seconds = seconds_since(start);
        p.lr = optimizer_.lr();
        on_step(p);
      }
      if (prof) prof->end_step(step_images);  // after on_step: its prints count as "other"
      step_images = 0;
    }
  }
  // A short tail (fewer than accum micro-batches) still updates, with its gradients scaled by 1/accum.
  if (pending > 0) {
    eager_optimizer_step();
    ++result.steps;
    if (prof) prof->end_step(step_images);
  } else if (prof) {
    prof->abandon_step();  // the step opened before the final, empty next()
  }
  if (!graphs_possible_) {  // no step is staged now: the static inputs of a disabled graph can go
    static_inputs_.clear();
    static_labels_.clear();
  }
  synchronize(device);
  result.seconds = seconds_since(start);
  result.mean_loss = running_loss();
  result.stopped_early = finished();
  return result;
}

double Trainer::running_loss() const {
  if (!loss_sum_.defined() || loss_count_ == 0) return 0.0;
  return loss_sum_.item() / static_cast<double>(loss_count_);
}

EvalResult Trainer::evaluate(BatchSource& source) {
  EvalResult result;
  const auto start = Clock::now();
  NoGradGuard no_grad;
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  if (options_.ddp) options_.ddp->broadcast_buffers();  // every rank evaluates rank 0's running statistics
  model_.eval();
  source.start_epoch(0);
  double loss_total = 0.0;
  int64_t correct = 0;
  Batch batch;
  while (source.next(batch)) {
    const Tensor logits = cast(model_.forward(batch.input), DType::f32);
    const int64_t n = logits.size(0);
    const int64_t classes = logits.size(1);
    loss_total += cross_entropy(logits, batch.labels, 0.0).item() * static_cast<double>(n);
    const std::vector<float> host_logits = logits.to_vector<float>();
    const std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const float* row = host_logits.data() + i * classes;
      const int64_t predicted = std::max_element(row, row + classes) - row;
      correct += predicted == labels[static_cast<size_t>(i)] ? 1 : 0;
    }
    result.images += n;
  }
  model_.train();
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
