#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// torch.nn.functional.pad(x, pads, mode, value). pads lists (left, right) pairs starting from the LAST dim:
// {l_w, r_w, l_h, r_h, ...}, at most 2 * x.dim() entries.
// - "constant": any number of dims; negative pads crop (as PyTorch); value fills; any dtype.
// - "reflect": mirror without repeating the edge; each pad < that dim's size. "replicate": repeat the edge
//   (the dim must not be empty). Both: up to the last 3 dims, pads >= 0, any leading dims (PyTorch asks for a
//   batch/channel layout; Liftoff accepts any rank).
// "circular" is not supported (ValueError). The result is contiguous, or channels-last for a channels-last
// CUDA tensor; x may have any strides. Backward: constant -> the gradient cropped (pad with -pads);
// reflect/replicate -> each input element sums the outputs that copied it (floating dtypes, f32 accumulation
// for f16/bf16, deterministic: no atomics).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
           double value = 0.0);

}  // namespace liftoff
