// Step runners: a Step (the micro-batches of one optimizer step) is data the Trainer hands to a runner.
// EagerRunner launches its work op by op; GraphRunner captures the whole step as a CUDA graph once (its
// micro-batches on concurrent streams where they can overlap) and replays it. Everything a capture touches
// (DDP, profiler, scaler, optimizer, the executor's counters) is a CaptureParticipant, so a failed capture
// is undone by asking each participant to abort, and falling back is choosing the eager runner.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/train/step.h"
#include "models/train/step_executor.h"
#include "models/train/trainer_options.h"
#include "runtime/graph.h"

namespace liftoff {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs the step (forward, backward, all-reduce, optimizer) and returns the sum of its micro-batch losses
  // (a device tensor, never read here); nullopt when the runner could not run it and nothing ran (the
  // caller then hands the step to another runner).
  virtual std::optional<Tensor> run(const Step& step) = 0;
  virtual const char* name() const = 0;
};

class EagerRunner : public StepRunner {
 public:
  explicit EagerRunner(StepExecutor& executor) : executor_(executor) {}
  std::optional<Tensor> run(const Step& step) override;
  const char* name() const override { return "eager"; }

 private:
  StepExecutor& executor_;
};

class GraphRunner : public StepRunner {
 public:
  // status: the run's GraphStatus, kept up to date (reason, nodes, streams, counts).
  GraphRunner(StepExecutor& executor, GraphStatus& status);
  ~GraphRunner() override;

  // Whether this step should go to the graph: a CUDA step of full micro-batches of the captured shapes (or,
  // before the capture, after the warm-up and at the largest batch seen). False once disabled, with the
  // reason in the status. Throws ValueError under --cuda-graphs on when the run cannot capture at all.
  bool wants(const Step& step);
  std::optional<Tensor> run(const Step& step) override;
  const char* name() const override { return "cuda-graph"; }
  bool disabled() const { return disabled_; }
  // Frees the static inputs of a disabled graph (between epochs: no step is staged then).
  void release_if_disabled();

 private:
  bool capturable(const Step& step, std::string* why);
  void disable(const std::string& reason);
  void stage(const Step& step);
  Tensor run_micro_batches_in_order();
  Tensor run_micro_batches_concurrently(int lanes);
  int capture_lanes(std::string* why) const;
  std::optional<Tensor> capture(const Step& step);
  Tensor replay();

  StepExecutor& executor_;
  GraphStatus& status_;
  bool disabled_ = false;
  bool one_stream_only_ = false;  // a concurrent capture failed: captures use one stream (status_ says why)
  std::unique_ptr<CudaGraph> graph_;
  std::vector<MicroBatch> static_;  // one per micro-batch of a step, read by the graph
  Tensor step_loss_;                // written by each replay: the sum of the step's micro-batch losses
  int64_t largest_batch_ = 0;       // rows of the largest micro-batch seen: the shape a capture uses
};

}  // namespace liftoff
