#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// torch.flip(x, dims): reverses the order along each of dims (unique, negative count from the end). A copy
// (contiguous, or channels-last for a channels-last CUDA tensor); any dtype, any strides. Backward: flip.
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
// torch.roll(x, shifts, dims): elements shifted by shifts[i] along dims[i], wrapping around; with dims empty,
// x is rolled as if flattened (one shift). A copy, as flip. Backward: roll by -shifts.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});

}  // namespace liftoff
