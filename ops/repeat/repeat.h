#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// x.repeat(repeats) (PyTorch's Tensor.repeat, numpy's tile): x tiled repeats[d] times along each dim; repeats
// has at least x.dim() entries (>= 0), extra leading ones add new dims. A contiguous copy; any dtype, any
// strides. Backward: the sum of gy over the tiles (f32/f64 on the CPU, also f16/bf16 on CUDA, accumulated in
// f32; deterministic, no atomics).
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);

}  // namespace liftoff
