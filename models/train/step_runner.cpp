#include "models/train/step_runner.h"

#include <algorithm>

#include "runtime/branches.h"

namespace liftoff {

namespace {

bool same_shapes(const MicroBatch& a, const MicroBatch& b) {
  return a.input.shape() == b.input.shape() && a.labels.shape() == b.labels.shape() &&
         a.input.dtype() == b.input.dtype() && a.labels.dtype() == b.labels.dtype();
}
}  // namespace

std::optional<Tensor> EagerRunner::run(const Step& step) {
  Tensor loss;
  const int64_t accum = executor_.options().accum;
  for (size_t k = 0; k < step.micro_batches.size(); ++k) {
    const int64_t index = static_cast<int64_t>(k);
    accumulate_loss(loss, executor_.run_micro_batch(step.micro_batches[k], index, index + 1 == accum));
  }
  // A short tail (fewer than accum micro-batches) still updates, with its gradients scaled by 1/accum.
  executor_.finish_step();
  return loss;
}

GraphRunner::GraphRunner(StepExecutor& executor, GraphStatus& status) : executor_(executor), status_(status) {
  status_.mode = executor.options().cuda_graphs;
  if (status_.mode == GraphMode::off) disable("--cuda-graphs off");
}

GraphRunner::~GraphRunner() = default;

void GraphRunner::disable(const std::string& reason) {
  disabled_ = true;
  status_.reason = reason;
  graph_.reset();
  step_loss_ = Tensor();
  executor_.set_preparing_capture(false);
  // static_ stays until the epoch ends (release_if_disabled).
}

void GraphRunner::release_if_disabled() {
  if (disabled_) static_.clear();
}

bool GraphRunner::capturable(const Step& step, std::string* why) {
  const Device device = step.micro_batches.front().input.device();
  if (!device.is_cuda()) {
    *why = str_cat("the step runs on ", device.str(), " (CUDA graphs need --device cuda)");
    return false;
  }
  return executor_.optimizer().prepare_for_graph_capture(why);  // sets *why when it cannot
}

bool GraphRunner::wants(const Step& step) {
  if (disabled_ || step.micro_batches.empty()) return false;
  const TrainerOptions& o = executor_.options();
  if (!graph_) {  // the first time: can this run capture at all?
    std::string why;
    if (!capturable(step, &why)) {
      LIFTOFF_CHECK(o.cuda_graphs != GraphMode::on, ValueError, "--cuda-graphs on: ", why,
                    "; use --cuda-graphs auto or off");
      disable(why);
      return false;
    }
    graph_ = std::make_unique<CudaGraph>(step.micro_batches.front().input.device());
    executor_.set_preparing_capture(true);
  }
  for (const MicroBatch& mb : step.micro_batches) largest_batch_ = std::max(largest_batch_, mb.input.size(0));
  if (static_cast<int64_t>(step.micro_batches.size()) != o.accum) return false;  // an epoch's short tail
  const MicroBatch& first = step.micro_batches.front();
  for (const MicroBatch& mb : step.micro_batches) {
    if (!same_shapes(mb, first)) return false;
  }
  if (graph_->ready()) return same_shapes(first, static_.front());
  if (status_.eager_steps < o.graph_warmup_steps) return false;
  // Capture a full batch, never an epoch's short last one (full steps would then all run eagerly).
  return first.input.size(0) >= largest_batch_;
}

void GraphRunner::stage(const Step& step) {
  // Part of getting the batch to the step (a device-to-device copy of microseconds): counted as data wait on
  // the host, and without a device mark, so "h2d" keeps meaning the loader's host-to-device copies.
  Profiler::StageScope host(executor_.options().profiler, Stage::data_wait);
  if (static_.empty() || !same_shapes(static_.front(), step.micro_batches.front())) {
    static_.clear();  // nothing captured reads them yet (wants() allows new shapes only before a capture)
    for (const MicroBatch& mb : step.micro_batches) {
      static_.push_back({Tensor::empty(mb.input.shape(), mb.input.dtype(), mb.input.device()),
                         Tensor::empty(mb.labels.shape(), mb.labels.dtype(), mb.labels.device())});
    }
  }
  for (size_t k = 0; k < step.micro_batches.size(); ++k) {
    static_[k].input.copy_(step.micro_batches[k].input);
    static_[k].labels.copy_(step.micro_batches[k].labels);
  }
}

std::optional<Tensor> GraphRunner::run(const Step& step) {
  stage(step);
  // The learning rate goes to the device before the graph, which reads it there.
  executor_.set_lr_for_step();
  if (graph_->ready()) return replay();
  return capture(step);
}

Tensor GraphRunner::replay() {
  std::vector<CaptureParticipant*> participants = executor_.capture_participants();
  std::vector<void*> events;
  try {
    for (CaptureParticipant* p : participants) p->before_replay(&events);
  } catch (...) {
    // E.g. DDP's communicator was aborted (a peer died or hung): no replay is launched on it, and the graph,
    // which holds the communicator's captured work (NCCL finishes an abort only once such graphs are gone),
    // goes.
    disable("the process group failed");
    throw;
  }
  graph_->replay(events);
  for (CaptureParticipant* p : participants) p->after_replay();
  ++status_.graph_steps;
  return step_loss_;
}

Tensor GraphRunner::run_micro_batches_in_order() {
  Tensor loss;
  const int64_t count = static_cast<int64_t>(static_.size());
  for (int64_t k = 0; k < count; ++k) {
    accumulate_loss(loss, executor_.run_micro_batch(static_[static_cast<size_t>(k)], k, k + 1 == count));
  }
  return loss;
}

Tensor GraphRunner::run_micro_batches_concurrently(int lanes) {
  const size_t count = static_.size();
  // Gradient hooks (DDP's all-reduce) must see the complete gradient: the last micro-batch runs after the
  // others have joined, accumulating through autograd as with one stream.
  const size_t overlapped = executor_.grad_hooks_present() ? count - 1 : count;
  std::vector<Tensor> losses(count);
  std::vector<std::vector<Tensor>> fresh(overlapped);  // micro-batch k >= 1: its own gradients
  {
    ConcurrentBranches branches(static_.front().input.device(), lanes);
    for (size_t k = 0; k < overlapped; ++k) {
      branches.enter(static_cast<int>(k));
      // The first micro-batch accumulates into .grad as with one stream; the others start from none.
      losses[k] = executor_.run_micro_batch(static_[k], static_cast<int64_t>(k), k + 1 == count,
                                            /*leave_in_grad=*/true);
      if (k == 0) {
        executor_.move_gradients_to_sums();
      } else {
        fresh[k] = executor_.take_gradients();
      }
    }
    branches.join();
  }
  // On the compute stream, in micro-batch order: the additions one stream makes, in the same order.
  for (size_t k = 1; k < overlapped; ++k) executor_.add_gradients_to_sums(std::move(fresh[k]));
  if (overlapped < count) {
    losses[count - 1] = executor_.run_micro_batch(static_[count - 1], static_cast<int64_t>(count - 1),
                                                  /*completes_step=*/true);
  }
  Tensor loss;
  for (const Tensor& l : losses) accumulate_loss(loss, l);
  return loss;
}

int GraphRunner::capture_lanes(std::string* why) const {
  const TrainerOptions& o = executor_.options();
  const int64_t accum = static_cast<int64_t>(static_.size());
  // With gradient hooks (DDP) the last micro-batch runs after the others (run_micro_batches_concurrently).
  const int64_t overlapped = executor_.grad_hooks_present() ? accum - 1 : accum;
  const int lanes = static_cast<int>(std::min<int64_t>(overlapped, o.max_concurrent_micro_batches));
  if (o.concurrent_micro_batches == BranchMode::off || one_stream_only_) {
    *why = one_stream_only_ ? status_.streams_reason : "--concurrent-micro-batches off";
  } else if (accum < 2) {
    *why = "one micro-batch per step";
  } else if (overlapped < 2) {
    *why =
        "with DDP the last micro-batch runs alone (its gradient hooks need the complete sums): --accum 2 "
        "leaves one to overlap";
  } else if (lanes < 2) {
    *why = "at most one stream allowed";
  } else if (o.concurrent_micro_batches == BranchMode::automatic) {
    const BranchMemory m = branch_memory(static_.front().input.device());
    const double extra = static_cast<double>(lanes - 1) * static_cast<double>(m.peak_allocated);
    if (extra > 0.5 * static_cast<double>(m.free_bytes)) {
      *why = str_cat("the extra activation memory (about ", static_cast<int64_t>(extra / (1 << 20)),
                     " MiB for ", lanes, " streams) would not fit in half the free device memory (",
                     m.free_bytes / (1 << 20), " MiB)");
    }
  }
  return why->empty() ? lanes : 1;
}

std::optional<Tensor> GraphRunner::capture(const Step& step) {
  const TrainerOptions& o = executor_.options();
  std::string one_stream_why;
  int lanes = capture_lanes(&one_stream_why);
  if (lanes > 1) {
    try {
      prepare_concurrent_lanes(static_.front().input.device(), lanes);  // streams, handles: not while capturing
    } catch (const Error& e) {
      if (o.concurrent_micro_batches == BranchMode::on) throw;
      one_stream_why = str_cat("preparing ", lanes, " streams failed: ", e.what());
      lanes = 1;
    }
  }
  if (lanes == 1) prepare_side_lane(static_.front().input.device());  // weight gradients beside the chain
  const std::vector<CaptureParticipant*> participants = executor_.capture_participants();
  const auto abort_all = [&] {
    graph_->abort_capture();
    for (CaptureParticipant* p : participants) p->abort_capture();
  };
  const int64_t step_before = executor_.global_step();
  try {
    for (CaptureParticipant* p : participants) p->begin_capture();
    graph_->begin_capture();
    Tensor loss = lanes > 1 ? run_micro_batches_concurrently(lanes) : run_micro_batches_in_order();
    executor_.finish_step(/*set_lr=*/false);
    std::vector<void*> events;
    for (CaptureParticipant* p : participants) p->end_capture(&events);
    graph_->end_capture(events);
    step_loss_ = loss;
  } catch (const Error& e) {
    abort_all();
    // A concurrent capture that failed (its activations did not fit, say) is tried again on one stream.
    if (lanes > 1 && o.concurrent_micro_batches == BranchMode::automatic) {
      status_.streams_reason = str_cat("the capture on ", lanes, " streams failed: ", e.what());
      one_stream_only_ = true;
      return capture(step);
    }
    if (dynamic_cast<const GraphCaptureError*>(&e) != nullptr) {
      LIFTOFF_CHECK(o.cuda_graphs != GraphMode::on, GraphCaptureError, "--cuda-graphs on: ", e.what());
    } else if (o.cuda_graphs == GraphMode::on) {
      throw;  // keeps its type (e.g. OutOfMemoryError)
    }
    disable(str_cat("capture failed: ", e.what()));
    return std::nullopt;
  } catch (...) {
    abort_all();  // leave no capture open behind a foreign exception
    throw;
  }
  // The first launch records the capture's own events, and the capture itself counted DDP's round: of the
  // replay participants only the process group's health check and watchdog apply.
  if (o.ddp) {
    try {
      o.ddp->group().check_healthy();
    } catch (...) {
      disable("the process group failed");
      throw;
    }
  }
  graph_->replay();
  if (o.ddp) o.ddp->group().watch_graph_replay("all-reduce in the captured training step");
  status_.used = true;
  status_.captured_at_step = step_before;
  status_.nodes = static_cast<int64_t>(graph_->num_nodes());
  status_.streams = lanes;
  if (status_.streams_reason.empty()) status_.streams_reason = one_stream_why;
  ++status_.graph_steps;
  return step_loss_;
}

}  // namespace liftoff
