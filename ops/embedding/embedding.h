#pragma once
#include <optional>

#include "runtime/tensor.h"

namespace liftoff {

// Looks up rows of weight [num_embeddings, dim] for integer indices (i64 or i32, any shape, also 0-d) ->
// [*indices.shape, dim] in weight's dtype, as PyTorch's F.embedding(input, weight, padding_idx). Dtypes:
// f32/f64 on the CPU, also f16/bf16 on CUDA. padding_idx (negative counts from the end) gets no gradient: its
// row of the weight gradient stays 0. Backward: gweight[r] = sum of gy rows at the positions whose index is
// r. Deterministic on both devices: the CPU adds the positions in order; CUDA sorts (index, position) pairs
// with a stable radix sort (CUB) and then sums each index's run of positions in position order, one thread
// per (run, column), so no float atomics are used and the result is bitwise reproducible. Indices outside [0,
// num_embeddings): on the CPU a ValueError naming the index and its position; on CUDA the indices are never
// read by the host (no sync), so such a position's output row is NaN and its gradient is dropped. Not
// supported: max_norm, scale_grad_by_freq, sparse gradients.
Tensor embedding(const Tensor& input, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace liftoff
