// A training step as data: the micro-batches of one optimizer step, gathered by the Trainer and handed to a
// step runner (models/train/step_runner.h), and the loss that turns a model output into the scalar to
// minimise.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

struct MicroBatch {
  Tensor input;   // the model input, on the training device
  Tensor labels;  // whatever the loss reads next to the output (class indices for cross-entropy)
};

// One optimizer step: `accum` micro-batches, or fewer for an epoch's short tail.
struct Step {
  std::vector<MicroBatch> micro_batches;
  int64_t images() const;  // rows of all micro-batches
};

// sum += value for device-side loss sums, where an undefined sum starts as a copy of value (no host read).
void accumulate_loss(Tensor& sum, const Tensor& value);

// The loss of one micro-batch: a differentiable scalar (a one-element tensor) from the model's output and the
// micro-batch. Computed on the training device without host reads (it runs inside captured steps).
using LossFn = std::function<Tensor(const Tensor& output, const MicroBatch& batch)>;

// Cross-entropy of the output (cast to f32 first: log-softmax in f32 whatever the autocast dtype) against
// class indices, with label smoothing; the Trainer's default loss.
LossFn cross_entropy_loss(double label_smoothing = 0.0);

}  // namespace liftoff
