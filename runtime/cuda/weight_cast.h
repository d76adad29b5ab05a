// Batched casts of f32 master weights into their half copies (autocast's HalfWeightCache,
// runtime/autocast.cpp): one launch refreshes every stale copy of a step instead of one small kernel per
// weight. Each copy keeps its layout: contiguous, or channels-last (KRSC) for a 4-D conv weight. A launch
// carries a table of up to a hundred tensors by value (no host-to-device copy, no sync, no allocation:
// capturable in a CUDA graph); a longer list takes several launches. The values are bit-identical to
// Tensor::copy_ (a cast is exact per element).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff::cuda {

// The longest K-row (C*R*S elements of a [K, C, R, S] weight) a channels-last copy may have: a block stages
// whole rows in shared memory. Longer rows take Tensor::copy_ (the tiled transpose).
constexpr int64_t kWeightCastMaxRow = 8192;

// True when cast_weights can write `half` from `master`: master f32 and contiguous, half f16/bf16 of the same
// shape on the same CUDA device, contiguous or channels-last with C*R*S <= kWeightCastMaxRow, fewer than
// 2^31 elements.
bool weight_cast_supported(const Tensor& master, const Tensor& half);

// halves[i] = masters[i] converted, in halves[i]'s layout, for every pair (weight_cast_supported; one CUDA
// device and one half dtype for all), on the calling thread's compute stream of that device.
void cast_weights(const std::vector<Tensor>& masters, const std::vector<Tensor>& halves);

}  // namespace liftoff::cuda
