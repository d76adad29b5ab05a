#pragma once
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace liftoff {

// Inverted dropout: in training, zeroes each element with probability p and scales the rest by 1/(1-p)
// (p == 1 zeroes everything). The mask is a function of (seed, offset, element index) only: with
// offset = gen.next_offset() and r = Philox(gen.seed(), offset, i / 4).v[i % 4], element i is kept when
// philox_uniform(r) >= p, identically on the CPU and on CUDA. Backward regenerates the mask from (seed,
// offset) instead of storing it. On CUDA the draw is gen.next_draw(): inside a captured CUDA graph each
// replay draws a fresh mask, the one the same eager step would draw (runtime/random.h). In eval (or p == 0)
// returns x itself and draws nothing from gen. f32/f64 on the CPU, also f16/bf16 on CUDA.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace liftoff
