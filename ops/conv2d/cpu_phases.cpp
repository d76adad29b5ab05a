// Stride-2 3x3 convolutions on the AVX-512 kernel (the "phases" path of ops/conv2d/cpu.cpp).
#include <algorithm>
#include <vector>

#include "ops/conv2d/cpu_columns.h"
#include "runtime/parallel.h"

namespace liftoff::cpu::conv_detail {

namespace {
// Stride-2 3x3 convolutions with padding 1 (the downsampling layers) on the AVX-512 kernel: the input is
// split into its four row/column parities, phase (a, b) [i, j] = x[2i + a - 1, 2j + b - 1] (zero outside),
// planes of (OH + 1) x (OW + 1). Tap (r, s) then reads phase (r % 2, s % 2) from (r / 2, s / 2) at unit
// stride, so the forward and the weight gradient read B or A rows at fixed offsets like the "same" path
// above; output pixel (oh, ow) is wide column oh * Wq + ow, junk at ow = OW. The input gradient splits the
// other way: the gx pixels of one parity each get a fixed subset of the taps (an even row only r = 1 from gy
// row i, an odd row r = 0 from gy row i + 1 and r = 2 from row i), so each parity is a small stride-1
// convolution of gy (bottom/right zero-padded) with its sub-kernel. The explicit im2col/col2im path spent
// about 3x the time per multiply-add of the "same" convolutions on these layers (bench_cpu_ops).
struct Phases {
  int64_t hq, wq, plane, wide;   // phase planes Hq x Wq = (OH + 1) x (OW + 1); wide = OH * Wq
  std::vector<int64_t> offsets;  // per (channel, r, s): the phase plane and shift of the tap
};

Phases make_phases(const Conv2dShape& g) {
  Phases ph;
  ph.hq = g.oh + 1;
  ph.wq = g.ow + 1;
  ph.plane = ph.hq * ph.wq;
  ph.wide = g.oh * ph.wq;
  ph.offsets.resize(static_cast<size_t>(g.c * 9));
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t s = 0; s < 3; ++s)
        ph.offsets[static_cast<size_t>((c * 3 + r) * 3 + s)] =
            (c * 4 + (r % 2) * 2 + s % 2) * ph.plane + (r / 2) * ph.wq + s / 2;
  return ph;
}

// row[j] = src[2j + b - 1] for j < wq, zero outside [0, w).
#if LIFTOFF_HAVE_AVX512_KERNEL
// Two masked loads from column max(2j0 + b - 1, 0) and one permute per 16 outputs (the scalar loop, one
// compare and select per element, was 1.8% of the batch-128 step).
__attribute__((target("avx512f"))) void split_row(const float* src, int64_t w, int64_t b, int64_t wq,
                                                  float* row) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t j0 = 0; j0 < wq; j0 += 16) {
    const int64_t start = 2 * j0 + b - 1, base = std::max<int64_t>(start, 0);
    const int shift = static_cast<int>(start - base);  // -1: lane 0 is column -1 (zero)
    const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(w - base), src + base);
    const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(w - base - 16), src + base + 16);
    const __m512 v = _mm512_maskz_permutex2var_ps(static_cast<__mmask16>(shift < 0 ? 0xFFFE : 0xFFFF), lo,
                                                  _mm512_add_epi32(even, _mm512_set1_epi32(shift)), hi);
    _mm512_mask_storeu_ps(row + j0, first_lanes(wq - j0), v);
  }
}
#else
void split_row(const float* src, int64_t w, int64_t b, int64_t wq, float* row) {
  for (int64_t j = 0; j < wq; ++j) {
    const int64_t iw = 2 * j + b - 1;
    row[j] = iw >= 0 && iw < w ? src[iw] : 0.0f;
  }
}
#endif

// The four phases of each channel of one image, plus a row of slack (the junk columns read one past a plane).
LIFTOFF_NO_LIBCALL_LOOPS void split_phases(const float* x, const Conv2dShape& g, const Phases& ph,
                                           float* __restrict out) {
  for (int64_t c = 0; c < g.c; ++c) {
    const float* xc = x + c * g.h * g.w;
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < 2; ++b) {
        float* __restrict dst = out + (c * 4 + a * 2 + b) * ph.plane;
        for (int64_t i = 0; i < ph.hq; ++i) {
          float* __restrict row = dst + i * ph.wq;
          const int64_t ih = 2 * i + a - 1;
          if (ih < 0 || ih >= g.h) {
            for (int64_t j = 0; j < ph.wq; ++j) row[j] = 0.0f;
            continue;
          }
          split_row(xc + ih * g.w, g.w, b, ph.wq, row);
        }
      }
    }
  }
  float* __restrict slack = out + g.c * 4 * ph.plane;
  for (int64_t q = 0; q < ph.wq; ++q) slack[q] = 0.0f;
}

// gy of one image on planes of Hq x Wq (zero row OH, zero column OW), plus a row of slack.
LIFTOFF_NO_LIBCALL_LOOPS void pad_phase_grad(const float* gy, const Conv2dShape& g, const Phases& ph,
                                             float* __restrict out) {
  for (int64_t k = 0; k < g.k; ++k) {
    const float* __restrict src = gy + k * g.oh * g.ow;
    float* __restrict dst = out + k * ph.plane;
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) dst[i * ph.wq + j] = src[i * g.ow + j];
      dst[i * ph.wq + g.ow] = 0.0f;
    }
    for (int64_t j = 0; j < ph.wq; ++j) dst[g.oh * ph.wq + j] = 0.0f;
  }
  float* __restrict slack = out + g.k * ph.plane;
  for (int64_t q = 0; q < ph.wq; ++q) slack[q] = 0.0f;
}

// gx[c, 2i + a, 2j + b] = wide[c, i * Wq + j] for the rows x cols pixels of parity (a, b).
void scatter_parity(const float* wide, const Conv2dShape& g, const Phases& ph, int64_t a, int64_t b,
                    int64_t rows, int64_t cols, float* gx) {
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t i = 0; i < rows; ++i) {
      const float* __restrict src = wide + (c * rows + i) * ph.wq;
      float* __restrict dst = gx + (c * g.h + 2 * i + a) * g.w + b;
      for (int64_t j = 0; j < cols; ++j) dst[2 * j] = src[j];
    }
  }
}

}  // namespace

bool use_phases(const Conv2dShape& g) {
  return gemm::has_offset_kernel<float>() && g.r == 3 && g.s == 3 && g.stride == 2 && g.padding == 1 &&
         g.oh == (g.h + 1) / 2 && g.ow == (g.w + 1) / 2;
}

void forward_phases(const float* xd, const float* wd, const float* bd, float* yd, const Conv2dShape& g) {
  const Phases ph = make_phases(g);
  const std::vector<gemm::CompactVector> dense = dense_columns(g.oh, g.ow, ph.wq);
  const int64_t plane = g.oh * g.ow;
  parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
    float* phases = scratch<float>(0, g.c * 4 * ph.plane + ph.wq);
    for (int64_t i = lo; i < hi; ++i) {
      split_phases(xd + i * g.c * g.h * g.w, g, ph, phases);
      float* yi = yd + i * g.k * plane;
      gemm::matmul_offsets(g.k, ph.wide, g.c * 9, wd, g.c * 9, nullptr, phases, 0, ph.offsets.data(), yi,
                           plane, /*accumulate=*/false, dense.data());
      if (bd) add_bias(bd, g.k, plane, yi);
    }
  });
}

// Input and weight gradients of a stride-2 3x3 convolution (see Phases); gx or gw may be undefined.
void backward_phases(const float* xd, const float* wd, const float* gyd, float* gxd, float* gwd,
                     const Conv2dShape& g) {
  const Phases ph = make_phases(g);
  const Conv2dShape gy_shape{g.n, g.k, g.oh, g.ow, g.k, 1, 1, g.oh, g.ow, 1, 0, false};
  // Input gradient: parity (a, b) of gx is a convolution of gy, zero-padded to (OH + 1) x (OW + 1) (the same
  // geometry as a phase plane), with the taps of that parity: (r, gy row shift) = (1, 0) for even rows, (0,
  // 1) and (2, 0) for odd rows; columns alike. sub[p] is [C, K * taps], offs[p] per (k, tap).
  struct Tap {
    int64_t r, shift;
  };
  const std::vector<Tap> taps[2] = {{{1, 0}}, {{0, 1}, {2, 0}}};
  std::vector<float> sub[4];
  std::vector<int64_t> offs[4];
  if (gxd) {
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < 2; ++b) {
        const int64_t p = a * 2 + b;
        const int64_t nt = static_cast<int64_t>(taps[a].size() * taps[b].size());
        sub[p].resize(static_cast<size_t>(g.c * g.k * nt));
        offs[p].resize(static_cast<size_t>(g.k * nt));
        for (int64_t k = 0; k < g.k; ++k) {
          int64_t t = 0;
          for (const Tap& tr : taps[a]) {
            for (const Tap& ts : taps[b]) {
              offs[p][static_cast<size_t>(k * nt + t)] = k * ph.plane + tr.shift * ph.wq + ts.shift;
              for (int64_t c = 0; c < g.c; ++c)
                sub[p][static_cast<size_t>((c * g.k + k) * nt + t)] =
                    wd[((k * g.c + c) * 3 + tr.r) * 3 + ts.r];
              ++t;
            }
          }
        }
      }
    }
  }
  // Weight gradient: per chunk of images, part[c, (r, s), k] += sum over wide columns of phase rows of x
  // (A rows at lda = 4 phase planes) times gy^T on the wide columns (zero rows at the junk columns).
  const int64_t chunks = std::min<int64_t>(g.n, num_threads());
  std::vector<float> parts(gwd ? static_cast<size_t>(chunks * g.c * 9 * g.k) : 0, 0.0f);
  Implicit im;  // for transpose_wide(): rows of Wq columns
  im.wp = ph.wq;
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    float* phases = gwd ? scratch<float>(0, g.c * 4 * ph.plane + ph.wq) : nullptr;
    float* gy_t = gwd ? scratch<float>(2, ph.wide * g.k) : nullptr;
    float* gy_pad = gxd ? scratch<float>(1, g.k * ph.plane + ph.wq) : nullptr;
    float* wide = gxd ? scratch<float>(3, g.c * ((g.h + 1) / 2) * ph.wq) : nullptr;
    for (int64_t chunk = lo; chunk < hi; ++chunk) {
      float* part = gwd ? parts.data() + chunk * g.c * 9 * g.k : nullptr;
      for (int64_t i = g.n * chunk / chunks; i < g.n * (chunk + 1) / chunks; ++i) {
        const float* gyi = gyd + i * g.k * g.oh * g.ow;
        if (gwd) {
          split_phases(xd + i * g.c * g.h * g.w, g, ph, phases);
          transpose_wide(gyi, g.k, gy_shape, im, gy_t);
          for (int64_t rs = 0; rs < 9; ++rs)
            gemm::matmul<float>(g.c, g.k, ph.wide, phases + ph.offsets[static_cast<size_t>(rs)], 4 * ph.plane,
                                gy_t, g.k, part + rs * g.k, 9 * g.k, /*accumulate=*/true);
        }
        if (gxd) {
          pad_phase_grad(gyi, g, ph, gy_pad);
          float* gxi = gxd + i * g.c * g.h * g.w;
          for (int64_t a = 0; a < 2; ++a) {
            for (int64_t b = 0; b < 2; ++b) {
              const int64_t p = a * 2 + b;
              const int64_t rows = (g.h - a + 1) / 2, cols = (g.w - b + 1) / 2;
              const int64_t depth = static_cast<int64_t>(offs[p].size());
              gemm::matmul_offsets(g.c, rows * ph.wq, depth, sub[p].data(), depth, nullptr, gy_pad, 0,
                                   offs[p].data(), wide, rows * ph.wq);
              scatter_parity(wide, g, ph, a, b, rows, cols, gxi);
            }
          }
        }
      }
    }
  });
  if (gwd) {
    for (int64_t chunk = 1; chunk < chunks; ++chunk)
      for (size_t q = 0; q < static_cast<size_t>(g.c * 9 * g.k); ++q)
        parts[q] += parts[static_cast<size_t>(chunk * g.c * 9 * g.k) + q];
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t rs = 0; rs < 9; ++rs)
          gwd[(k * g.c + c) * 9 + rs] = parts[static_cast<size_t>((c * 9 + rs) * g.k + k)];
  }
}

}  // namespace liftoff::cpu::conv_detail
