// Helpers shared by the loss fronts (loss.cpp, nll_loss.cpp): reduction names and the compute dtype.
#pragma once
#include <string>

#include "runtime/tensor.h"

namespace liftoff::loss_front {

enum class Reduction { none, mean, sum, batchmean };

// "none" | "mean" | "sum" (and "batchmean" where allowed); ValueError naming op and the accepted names.
Reduction parse_reduction(const char* op, const std::string& name, bool allow_batchmean = false);

// The dtype a loss computes in: the wider floating dtype of a and b (f16 + bf16 -> f32), then f32 for a half
// dtype under autocast.
DType compute_dtype(DType a, DType b);

// Checks that x is a defined floating tensor; errors name op, what ("input", "target") and the shape.
void check_floating(const char* op, const char* what, const Tensor& x);

}  // namespace liftoff::loss_front
