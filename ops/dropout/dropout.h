#pragma once
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace liftoff {

// Inverted dropout: in training, zeroes each element with probability p and scales the rest by 1/(1-p);
// the mask comes from Philox(gen.seed(), gen.next_offset(), element index). In eval (or p == 0) returns x.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace liftoff
