// Seedable random tensors. A Generator is (seed, offset): each draw reserves a fresh range of Philox counters
// by advancing the offset, so results are reproducible from the seed and the order of draws alone.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves one Philox stream and returns its offset. Not while capturing a CUDA graph: every replay would
  // reuse the captured offset (the same dropout mask each step), so capture fails instead.
  uint64_t next_offset();

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// Normal(mean, std) and Uniform[low, high) tensors, generated on the host (f32 or f64) then moved to device.
Tensor randn(const Shape& shape, Generator& gen, double mean = 0.0, double std = 1.0,
             DType dtype = DType::f32, Device device = Device::cpu());
Tensor rand_uniform(const Shape& shape, Generator& gen, double low = 0.0, double high = 1.0,
                    DType dtype = DType::f32, Device device = Device::cpu());
// A random permutation of 0..n-1 (Fisher-Yates driven by Philox).
std::vector<int64_t> randperm(int64_t n, Generator& gen);

}  // namespace liftoff
