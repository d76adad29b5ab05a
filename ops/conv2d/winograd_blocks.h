// Block bookkeeping shared by the CPU Winograd paths (cpu_winograd.cpp: F(2x2, 3x3); cpu_winograd4.cpp:
// F(4x4, 3x3)). Work goes in blocks of NB tiles taken in order over all images (a block may span images), so
// a block's GEMMs have NB columns even for 7x7 maps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "ops/conv2d/kernels.h"
#include "runtime/error.h"

namespace liftoff::cpu::winograd::blocks {

// Leading-dimension padding of the block buffers (floats): keeps a transform's streams (one per product
// index xi) off a common 4 KiB alias. With NB a multiple of 32, every row starts on a 64-byte boundary (the
// AVX-512 transforms' aligned stores rely on it).
constexpr int64_t kPad = 16;
static_assert(kPad % 16 == 0, "rows of the block buffers must stay 64-byte aligned");

struct Tiles {
  int64_t h, w;       // image
  int64_t th, tw;     // tiles per column and row
  int64_t per_image;  // th * tw
  int64_t total;      // n * per_image
};

// Output tiles of `tile` x `tile` pixels over g's images; a last row or column of tiles may be partial.
inline Tiles make_tiles(const Conv2dShape& g, int64_t tile) {
  Tiles t{};
  t.h = g.h;
  t.w = g.w;
  t.th = (g.h + tile - 1) / tile;
  t.tw = (g.w + tile - 1) / tile;
  t.per_image = t.th * t.tw;
  t.total = g.n * t.per_image;
  return t;
}

// Tiles per block for `products` element-wise products per tile (16 or 36): the block's V and M (or V and D)
// together about 1 MiB, so they stay in L2 (2 MiB per core on the development VM) next to U; a multiple of 32
// (the GEMM's column strips), 32 to 1024.
inline int64_t block_tiles(int64_t products, int64_t cin, int64_t cout) {
  constexpr int64_t kBudgetFloats = 256 * 1024;
  const int64_t nb = kBudgetFloats / (products * (cin + cout)) / 32 * 32;
  return std::clamp<int64_t>(nb, 32, 1024);
}

// Per-thread buffers (slots 0 to 2), grown and reused across calls (every entry read is written first);
// 64-byte aligned, so that the AVX-512 transforms' full-width stores are aligned.
inline float* buffer(int slot, int64_t size) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float[], Free> buffers[3];
  thread_local int64_t sizes[3] = {0, 0, 0};
  if (sizes[slot] < size) {
    buffers[slot].reset();
    const size_t bytes = (static_cast<size_t>(size) * sizeof(float) + 63) / 64 * 64;
    buffers[slot].reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    LIFTOFF_CHECK(buffers[slot] != nullptr, OutOfMemoryError, "Winograd: out of memory (", bytes, " bytes)");
    sizes[slot] = size;
  }
  return buffers[slot].get();
}

}  // namespace liftoff::cpu::winograd::blocks
