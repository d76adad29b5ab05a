#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Sum and mean over all elements -> a one-element tensor of shape [].
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);

}  // namespace liftoff
