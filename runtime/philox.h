// Philox4x32-10 counter-based RNG (Salmon et al., SC'11). Stateless: the same (key, counter) gives the same
// numbers on the host and on the device, so per-sample randomness does not depend on thread timing.
#pragma once
#include <cstdint>

#include "runtime/macros.h"

namespace liftoff {

struct Philox4 {
  uint32_t v[4];
};

LIFTOFF_HD uint32_t philox_mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *lo = static_cast<uint32_t>(product);
  return static_cast<uint32_t>(product >> 32);
}

// Ten rounds over a 128-bit counter with a 64-bit key.
LIFTOFF_HD Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t lo0, lo1;
    const uint32_t hi0 = philox_mulhi(0xD2511F53u, c0, &lo0);
    const uint32_t hi1 = philox_mulhi(0xCD9E8D57u, c2, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// A uniform float in [0, 1) from 24 random bits.
LIFTOFF_HD float philox_uniform(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Counter for stream element i: the low/high words of i, then a 64-bit stream offset.
LIFTOFF_HD Philox4 philox_at(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox4x32(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                    static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Where one kernel launch's Philox numbers start. Eager: (seed, offset) by value. In a captured CUDA graph:
// device_state points at a generator's [seed, offset] on the device (rewritten before every replay,
// runtime/random.h) and `offset` is this draw's index among the graph's draws from that generator, so each
// replay draws fresh numbers, the ones the same eager step would draw.
struct PhiloxDraw {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* device_state = nullptr;  // set only for CUDA kernels (device memory)

  // The (seed, offset) to use: reads device_state where it is set.
  LIFTOFF_HD PhiloxDraw resolve() const {
    if (device_state == nullptr) return *this;
    return PhiloxDraw{device_state[0], device_state[1] + offset, nullptr};
  }
};

}  // namespace liftoff
