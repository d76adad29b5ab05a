// Internal to ops/conv2d's CPU paths (cpu.cpp, cpu_phases.cpp): the per-thread column buffers, the "wide"
// column layout of the implicit-im2col paths and its helpers, and the stride-2 3x3 path's entry points.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/common/cpu_gemm.h"
#include "ops/conv2d/kernels.h"

// GCC turns the short zero-fill and copy loops below (often one element: a padding column) into memset and
// memmove calls, one per row; plain vectorised loops are cheaper here.
#if defined(__GNUC__) && !defined(__clang__)
#define LIFTOFF_NO_LIBCALL_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define LIFTOFF_NO_LIBCALL_LOOPS
#endif

namespace liftoff::cpu::conv_detail {

// Per-thread column buffers, reused across calls and layers (grown, never shrunk: at most the largest
// C*R*S x OH*OW seen, per slot). im2col and the GEMMs overwrite every entry, so they are never cleared.
template <class T>
inline T* scratch(int slot, int64_t size) {
  thread_local std::vector<T> buffers[4];
  std::vector<T>& b = buffers[slot];
  if (b.size() < static_cast<size_t>(size)) {
    b.clear();
    b.shrink_to_fit();
    b.resize(static_cast<size_t>(size));
  }
  return b.data();
}

// Implicit im2col for "same" convolutions (stride 1, output as large as the input, so R = S = 2p + 1) on the
// AVX-512 kernel: the image is copied once into a zero-padded plane per channel (Hp x Wp), and the GEMM reads
// column row (c, r, s) at offset c*Hp*Wp + r*Wp + s of it. Output pixel (oh, ow) is then "wide" column
// oh*Wp + ow; the columns with ow >= W are junk and dropped when the result is compacted (or, in the weight
// gradient, multiplied by zero rows). No C*R*S x H*W column matrix is written.
struct Implicit {
  int64_t hp, wp, padded_plane, wide;  // wide = H * Wp columns
  std::vector<int64_t> offsets;        // per (channel, r, s), channel-major
};

#if LIFTOFF_HAVE_AVX512_KERNEL
// Lanes [0, n) set.
inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1);
}
#endif

// out[h * Wp + w, c] = x[c, h, w] for w < W, zero for the junk columns w >= W. Eight channels at a time:
// eight sequential read streams and contiguous writes (one channel at a time reads plane-strided).
template <class T>
LIFTOFF_NO_LIBCALL_LOOPS void transpose_wide(const T* x, int64_t channels, const Conv2dShape& g,
                                             const Implicit& im, T* __restrict out) {
  const int64_t hw = g.h * g.w;
  for (int64_t c0 = 0; c0 < channels; c0 += 8) {
    const int64_t cn = std::min<int64_t>(8, channels - c0);
    for (int64_t h = 0; h < g.h; ++h) {
      const T* __restrict src = x + c0 * hw + h * g.w;
      T* __restrict rows = out + h * im.wp * channels + c0;
      for (int64_t q = 0; q < g.w; ++q)
        for (int64_t c = 0; c < cn; ++c) rows[q * channels + c] = src[c * hw + q];
    }
  }
  for (int64_t h = 0; h < g.h; ++h) {
    T* __restrict junk = out + (h * im.wp + g.w) * channels;
    for (int64_t q = 0; q < (im.wp - g.w) * channels; ++q) junk[q] = T(0);
  }
}

// The column map that stores wide columns h * Wp + w (w < W) of an h x Wp product straight to h * W + w.
std::vector<gemm::CompactVector> dense_columns(int64_t h, int64_t w, int64_t wp);
// out[m, :] += bias[m] over planes of `plane` values.
void add_bias(const float* bias, int64_t rows, int64_t plane, float* __restrict out);

// Stride-2 3x3 convolutions with padding 1 on the AVX-512 kernel (cpu_phases.cpp).
bool use_phases(const Conv2dShape& g);
void forward_phases(const float* xd, const float* wd, const float* bd, float* yd, const Conv2dShape& g);
// Input and weight gradients; gx or gw may be null.
void backward_phases(const float* xd, const float* wd, const float* gyd, float* gxd, float* gwd,
                     const Conv2dShape& g);

}  // namespace liftoff::cpu::conv_detail
