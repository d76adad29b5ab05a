#include "models/train/step.h"

#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"

namespace liftoff {

int64_t Step::images() const {
  int64_t n = 0;
  for (const MicroBatch& mb : micro_batches) n += mb.input.size(0);
  return n;
}

void accumulate_loss(Tensor& sum, const Tensor& value) {
  if (!sum.defined()) {
    sum = value.clone();
  } else {
    accumulate_into(sum, value);
  }
}

LossFn cross_entropy_loss(double label_smoothing) {
  return [label_smoothing](const Tensor& output, const MicroBatch& batch) {
    return cross_entropy(cast(output, DType::f32), batch.labels, label_smoothing);
  };
}

}  // namespace liftoff
