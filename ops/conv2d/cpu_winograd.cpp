// Winograd F(2x2, 3x3) for the forward of f32 "same" 3x3 convolutions on the CPU (see winograd.h; the
// gradients use F(4x4, 3x3), cpu_winograd4.cpp).
//
// Matrices (the standard F(2x2, 3x3) choice, interpolation points 0, 1, -1, infinity):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   input tile d (4x4)     -> V = B^T d B
//   G   = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]        kernel g (3x3)         -> U = G g G^T
//   A^T = [1 1 1 0; 0 1 -1 -1]                       product M (4x4)        -> Y = A^T M A (2x2)
// Tiles: output tile (ty, tx) covers output rows 2ty, 2ty+1 and columns 2tx, 2tx+1 and reads input rows
// 2ty-1 .. 2ty+2 (zero outside the image). Odd sizes get a last tile whose second row or column is dropped.
//
// Work is split into blocks of NB tiles taken in order over all images (a block may span images), so the 16
// GEMMs of a block have NB columns even for 7x7 maps (16 tiles per image). Layouts per block:
//   V[xi][c][j]  (16 x C x NB), M[xi][k][j] (16 x K x NB).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ops/common/cpu_gemm.h"
#include "ops/conv2d/winograd.h"
#include "ops/conv2d/winograd_blocks.h"
#include "runtime/config.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace liftoff::cpu::winograd {

namespace {

constexpr int64_t kMinChannels = 8;
using blocks::buffer;
using blocks::kPad;
using blocks::Tiles;

// Calls fn(image, ty, tx0, tx1, j0) for the runs of tiles of one tile row that make up [t0, t1); j0 is the
// first run tile's index in the block.
template <class Fn>
void for_each_run(const Tiles& tl, int64_t t0, int64_t t1, Fn&& fn) {
  for (int64_t t = t0; t < t1;) {
    const int64_t img = t / tl.per_image, rem = t % tl.per_image;
    const int64_t ty = rem / tl.tw, tx0 = rem % tl.tw;
    const int64_t tx1 = std::min(tl.tw, tx0 + (t1 - t));
    fn(img, ty, tx0, tx1, t - t0);
    t += tx1 - tx0;
  }
}

// The run of tiles that starts at tile t of the block [t0, t1) (for_each_run without a lambda: the AVX-512
// functions below cannot pass their target to one).
struct Run {
  int64_t img, ty, tx0, tx1, j0;
};
inline Run run_at(const Tiles& tl, int64_t t, int64_t t0, int64_t t1) {
  const int64_t img = t / tl.per_image, rem = t % tl.per_image;
  const int64_t ty = rem / tl.tw, tx0 = rem % tl.tw;
  return {img, ty, tx0, std::min(tl.tw, tx0 + (t1 - t)), t - t0};
}

// U[xi][o][i] = (G g G^T)[xi] with g = w[o, i]; w is [cout, cin, 3, 3].
void transform_weights(const float* w, int64_t cout, int64_t cin, float* u) {
  for (int64_t o = 0; o < cout; ++o) {
    for (int64_t i = 0; i < cin; ++i) {
      float g[3][3];
      const float* src = w + (o * cin + i) * 9;
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) g[r][s] = src[r * 3 + s];
      float q[4][3];  // G g
      for (int s = 0; s < 3; ++s) {
        q[0][s] = g[0][s];
        q[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
        q[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
        q[3][s] = g[2][s];
      }
      for (int r = 0; r < 4; ++r) {
        const float v[4] = {q[r][0], 0.5f * (q[r][0] + q[r][1] + q[r][2]),
                            0.5f * (q[r][0] - q[r][1] + q[r][2]), q[r][2]};
        for (int s = 0; s < 4; ++s) u[((r * 4 + s) * cout + o) * cin + i] = v[s];
      }
    }
  }
}

// V[xi][c][j] = (B^T d B)[xi] for the tiles [t0, t1) of x [n, channels, h, w]; ldv = the block's NB.
void input_transform_portable(const float* x, int64_t channels, const Tiles& tl, int64_t t0, int64_t t1,
                              float* v, int64_t ldv) {
  const int64_t len = tl.tw + 1;
  // Input rows 2ty-1+i, split into the columns of the padded row at even (input column 2m-1) and odd (2m)
  // positions, zero outside the image: the transform then reads unit-stride.
  float* rows = buffer(2, 8 * len);
  for_each_run(tl, t0, t1, [&](int64_t img, int64_t ty, int64_t tx0, int64_t tx1, int64_t j0) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* plane = x + (img * channels + c) * tl.h * tl.w;
      for (int i = 0; i < 4; ++i) {
        float* __restrict ev = rows + (2 * i) * len;
        float* __restrict od = rows + (2 * i + 1) * len;
        const int64_t ih = 2 * ty - 1 + i;
        if (ih < 0 || ih >= tl.h) {
          for (int64_t m = tx0; m <= tx1; ++m) ev[m] = od[m] = 0.0f;
          continue;
        }
        const float* __restrict src = plane + ih * tl.w;
        // m with both columns 2m-1 and 2m inside: 1 <= m <= (w-1)/2.
        const int64_t lo = std::max<int64_t>(tx0, 1), hi = std::min<int64_t>(tx1, (tl.w - 1) / 2);
        for (int64_t m = tx0; m < std::min(lo, tx1 + 1); ++m) {
          ev[m] = (2 * m - 1 >= 0 && 2 * m - 1 < tl.w) ? src[2 * m - 1] : 0.0f;
          od[m] = 2 * m < tl.w ? src[2 * m] : 0.0f;
        }
        for (int64_t m = lo; m <= hi; ++m) {
          ev[m] = src[2 * m - 1];
          od[m] = src[2 * m];
        }
        for (int64_t m = std::max(lo, hi + 1); m <= tx1; ++m) {
          ev[m] = (2 * m - 1 >= 0 && 2 * m - 1 < tl.w) ? src[2 * m - 1] : 0.0f;
          od[m] = 2 * m < tl.w ? src[2 * m] : 0.0f;
        }
      }
      const float* __restrict e0 = rows;
      const float* __restrict o0 = rows + len;
      const float* __restrict e1 = rows + 2 * len;
      const float* __restrict o1 = rows + 3 * len;
      const float* __restrict e2 = rows + 4 * len;
      const float* __restrict o2 = rows + 5 * len;
      const float* __restrict e3 = rows + 6 * len;
      const float* __restrict o3 = rows + 7 * len;
      float* __restrict out = v + c * ldv + j0 - tx0;
      const int64_t xs = channels * ldv;  // between consecutive xi
      for (int64_t m = tx0; m < tx1; ++m) {
        // B^T d: rows r0 - r2, r1 + r2, r2 - r1, r1 - r3, at padded columns 2m, 2m+1, 2m+2, 2m+3.
        float t[4][4];
        const float a0 = e0[m], a1 = o0[m], a2 = e0[m + 1], a3 = o0[m + 1];
        const float b0 = e1[m], b1 = o1[m], b2 = e1[m + 1], b3 = o1[m + 1];
        const float c0 = e2[m], c1 = o2[m], c2 = e2[m + 1], c3 = o2[m + 1];
        const float d0 = e3[m], d1 = o3[m], d2 = e3[m + 1], d3 = o3[m + 1];
        t[0][0] = a0 - c0, t[0][1] = a1 - c1, t[0][2] = a2 - c2, t[0][3] = a3 - c3;
        t[1][0] = b0 + c0, t[1][1] = b1 + c1, t[1][2] = b2 + c2, t[1][3] = b3 + c3;
        t[2][0] = c0 - b0, t[2][1] = c1 - b1, t[2][2] = c2 - b2, t[2][3] = c3 - b3;
        t[3][0] = b0 - d0, t[3][1] = b1 - d1, t[3][2] = b2 - d2, t[3][3] = b3 - d3;
        for (int r = 0; r < 4; ++r) {
          out[(r * 4 + 0) * xs + m] = t[r][0] - t[r][2];
          out[(r * 4 + 1) * xs + m] = t[r][1] + t[r][2];
          out[(r * 4 + 2) * xs + m] = t[r][2] - t[r][1];
          out[(r * 4 + 3) * xs + m] = t[r][1] - t[r][3];
        }
      }
    }
  });
}

// y[img, o, 2ty+a, 2tx+b] = (A^T M A)[a][b] + bias[o] for the tiles [t0, t1); M[xi][o][j] with ldm = NB.
void output_transform_portable(const float* mm, int64_t ldm, int64_t channels, const Tiles& tl, int64_t t0,
                               int64_t t1, const float* bias, float* y) {
  float* rows = buffer(2, 4 * tl.tw + 2);
  for_each_run(tl, t0, t1, [&](int64_t img, int64_t ty, int64_t tx0, int64_t tx1, int64_t j0) {
    for (int64_t o = 0; o < channels; ++o) {
      const float bo = bias ? bias[o] : 0.0f;
      const float* __restrict in = mm + o * ldm + j0 - tx0;
      const int64_t xs = channels * ldm;
      float* __restrict row0 = rows;
      float* __restrict row1 = rows + 2 * tl.tw + 1;
      for (int64_t m = tx0; m < tx1; ++m) {
        float s[2][4];  // A^T M
        for (int q = 0; q < 4; ++q) {
          const float m0 = in[(0 * 4 + q) * xs + m], m1 = in[(1 * 4 + q) * xs + m];
          const float m2 = in[(2 * 4 + q) * xs + m], m3 = in[(3 * 4 + q) * xs + m];
          s[0][q] = m0 + m1 + m2;
          s[1][q] = m1 - m2 - m3;
        }
        row0[2 * m] = s[0][0] + s[0][1] + s[0][2] + bo;
        row0[2 * m + 1] = s[0][1] - s[0][2] - s[0][3] + bo;
        row1[2 * m] = s[1][0] + s[1][1] + s[1][2] + bo;
        row1[2 * m + 1] = s[1][1] - s[1][2] - s[1][3] + bo;
      }
      float* plane = y + (img * channels + o) * tl.h * tl.w;
      const int64_t q0 = 2 * tx0, q1 = std::min(2 * tx1, tl.w);
      float* __restrict dst0 = plane + 2 * ty * tl.w;
      for (int64_t q = q0; q < q1; ++q) dst0[q] = row0[q];
      if (2 * ty + 1 < tl.h) {
        float* __restrict dst1 = dst0 + tl.w;
        for (int64_t q = q0; q < q1; ++q) dst1[q] = row1[q];
      }
    }
  });
}

#if LIFTOFF_HAVE_AVX512_KERNEL
// The same two transforms with AVX-512, one vector across up to 15 (16 for the output) tiles of a tile row:
// ResNet's 28, 14 and 7 wide maps have 14, 7 and 4 tiles per row, one masked vector each.

// Lanes [0, n) set.
inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1);
}

// Lanes q whose column `start + q` lies in [0, w).
inline __mmask16 column_mask(int64_t start, int64_t w) {
  const int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>(16, w - start);
  return hi <= lo ? 0 : static_cast<__mmask16>(first_lanes(hi) & ~first_lanes(lo));
}

// Input rows 2ty-1 .. 2ty+2 of one plane as the four column phases of a tile: lane m of phase k holds column
// 2(m0+m) - 1 + k, zero outside the image. Two loads per row from column `start` (never before the row), one
// two-source permute per phase (the lane of column -1 is zeroed by `keep`).
struct Phases {
  __m512i idx[4];
  __mmask16 keep[4];
  __mmask16 l0, l1;
  int64_t start;
};

__attribute__((target("avx512f"))) inline Phases make_phases(int64_t m0, int64_t w) {
  Phases ph;
  const int64_t first = 2 * m0 - 1;
  ph.start = std::max<int64_t>(first, 0);
  const int shift = static_cast<int>(first - ph.start);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int k = 0; k < 4; ++k) {
    ph.idx[k] = _mm512_add_epi32(even, _mm512_set1_epi32(k + shift));
    ph.keep[k] = static_cast<__mmask16>(k + shift < 0 ? 0xFFFE : 0xFFFF);
  }
  ph.l0 = column_mask(ph.start, w);
  ph.l1 = column_mask(ph.start + 16, w);
  return ph;
}

// B^T d B for one channel's tile row: r[xi], lane m for tile m0 + m.
__attribute__((target("avx512f"))) inline void transform_rows(const float* plane, int64_t ty, const Tiles& tl,
                                                              const Phases& ph, __m512* r) {
  __m512 p0[4], p1[4], p2[4], p3[4];  // input rows 2ty-1 .. 2ty+2, by phase
  auto load = [&](int i, __m512* p) __attribute__((target("avx512f"))) {
    const int64_t ih = 2 * ty - 1 + i;
    if (ih < 0 || ih >= tl.h) {
      for (int k = 0; k < 4; ++k) p[k] = _mm512_setzero_ps();
      return;
    }
    const float* row = plane + ih * tl.w + ph.start;
    const __m512 r0 = _mm512_maskz_loadu_ps(ph.l0, row);
    const __m512 r1 = _mm512_maskz_loadu_ps(ph.l1, row + 16);
    for (int k = 0; k < 4; ++k) p[k] = _mm512_maskz_permutex2var_ps(ph.keep[k], r0, ph.idx[k], r1);
  };
  load(0, p0);
  load(1, p1);
  load(2, p2);
  load(3, p3);
  for (int k = 0; k < 4; ++k) {
    // B^T d, column k of the tile: rows r0 - r2, r1 + r2, r2 - r1, r1 - r3.
    const __m512 a = p0[k], b = p1[k], c = p2[k], d = p3[k];
    p0[k] = _mm512_sub_ps(a, c);
    p1[k] = _mm512_add_ps(b, c);
    p2[k] = _mm512_sub_ps(c, b);
    p3[k] = _mm512_sub_ps(b, d);
  }
  const __m512* rows[4] = {p0, p1, p2, p3};
  for (int i = 0; i < 4; ++i) {
    const __m512* q = rows[i];
    r[i * 4 + 0] = _mm512_sub_ps(q[0], q[2]);
    r[i * 4 + 1] = _mm512_add_ps(q[1], q[2]);
    r[i * 4 + 2] = _mm512_sub_ps(q[2], q[1]);
    r[i * 4 + 3] = _mm512_sub_ps(q[1], q[3]);
  }
}

// Channel by channel, the block's tile rows one after the other: each of the 16 streams V[xi][c][0, nb) is
// assembled in a register and written 16 tiles at a time with aligned full-width stores (v from buffer(),
// ldv a multiple of 16). Storing each tile row's vector where it lands (14 or 7 tiles at any offset, all
// channels of one tile row in turn) split most stores across two cache lines: 1.55x, 1.9x and 2.5x the time
// at 28x28x16, 14x14x32 and 7x7x64 (batch 128, one thread, hot cache). Keeping the phases of m0 = 15, 30, ...
// in an array (for maps over 30 wide) was slower at these sizes than making them per vector.
__attribute__((target("avx512f"))) void input_transform_avx512(const float* x, int64_t channels,
                                                               const Tiles& tl, int64_t t0, int64_t t1,
                                                               float* v, int64_t ldv) {
  const int64_t xs = channels * ldv;
  const Phases ph0 = make_phases(0, tl.w);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t c = 0; c < channels; ++c) {
    __m512 acc[16];
    for (int xi = 0; xi < 16; ++xi) acc[xi] = _mm512_setzero_ps();
    int64_t fill = 0;  // lanes of acc already set
    float* dst = v + c * ldv;
    for (int64_t t = t0; t < t1;) {
      const Run run = run_at(tl, t, t0, t1);
      t += run.tx1 - run.tx0;
      const float* plane = x + (run.img * channels + c) * tl.h * tl.w;
      for (int64_t m0 = run.tx0; m0 < run.tx1; m0 += 15) {
        const int64_t nt = std::min<int64_t>(15, run.tx1 - m0);
        __m512 r[16];
        if (m0 == 0) {
          transform_rows(plane, run.ty, tl, ph0, r);
        } else {
          const Phases ph = make_phases(m0, tl.w);
          transform_rows(plane, run.ty, tl, ph, r);
        }
        // Lanes [fill, fill + nt) of acc take lanes [0, nt) of r; a full acc is stored, and the rest of r
        // starts the next.
        const __mmask16 put = static_cast<__mmask16>(first_lanes(fill + nt) & ~first_lanes(fill));
        const __m512i up = _mm512_sub_epi32(lane, _mm512_set1_epi32(static_cast<int>(fill)));
        for (int xi = 0; xi < 16; ++xi) acc[xi] = _mm512_mask_permutexvar_ps(acc[xi], put, up, r[xi]);
        fill += nt;
        if (fill >= 16) {
          for (int xi = 0; xi < 16; ++xi) _mm512_store_ps(dst + xi * xs, acc[xi]);
          dst += 16;
          fill -= 16;
          const __m512i down = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(nt - fill)));
          for (int xi = 0; xi < 16; ++xi) acc[xi] = _mm512_maskz_permutexvar_ps(0xFFFF, down, r[xi]);
        }
      }
    }
    if (fill > 0)
      for (int xi = 0; xi < 16; ++xi) _mm512_mask_store_ps(dst + xi * xs, first_lanes(fill), acc[xi]);
  }
}

__attribute__((target("avx512f"))) void output_transform_avx512(const float* mm, int64_t ldm,
                                                                int64_t channels, const Tiles& tl, int64_t t0,
                                                                int64_t t1, const float* bias, float* y) {
  const int64_t xs = channels * ldm;
  const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  // Channel by channel: 16 sequential input streams, and y written plane by plane.
  for (int64_t o = 0; o < channels; ++o) {
    const __m512 bo = _mm512_set1_ps(bias ? bias[o] : 0.0f);
    for (int64_t t = t0; t < t1;) {
      const Run run = run_at(tl, t, t0, t1);
      const int64_t img = run.img, ty = run.ty, tx0 = run.tx0, tx1 = run.tx1, j0 = run.j0;
      t += tx1 - tx0;
      for (int64_t m0 = tx0; m0 < tx1; m0 += 16) {
        const int64_t nt = std::min<int64_t>(16, tx1 - m0);
        const __mmask16 load = first_lanes(nt);
        // Output columns 2*m0 .. 2*(m0+nt), cut at the image edge.
        const int64_t col = 2 * m0, end = std::min(2 * (m0 + nt), tl.w);
        const __mmask16 s0 = first_lanes(end - col), s1 = first_lanes(end - col - 16);
        const bool second_row = 2 * ty + 1 < tl.h;
        const float* in = mm + o * ldm + j0 + (m0 - tx0);
        __m512 s[2][4];  // A^T M
        for (int q = 0; q < 4; ++q) {
          const __m512 a = _mm512_maskz_loadu_ps(load, in + (0 * 4 + q) * xs);
          const __m512 b = _mm512_maskz_loadu_ps(load, in + (1 * 4 + q) * xs);
          const __m512 c = _mm512_maskz_loadu_ps(load, in + (2 * 4 + q) * xs);
          const __m512 d = _mm512_maskz_loadu_ps(load, in + (3 * 4 + q) * xs);
          s[0][q] = _mm512_add_ps(_mm512_add_ps(a, b), c);
          s[1][q] = _mm512_sub_ps(_mm512_sub_ps(b, c), d);
        }
        float* dst = y + ((img * channels + o) * tl.h + 2 * ty) * tl.w + col;
        for (int r = 0; r < (second_row ? 2 : 1); ++r) {
          const __m512 e = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), s[r][2]), bo);
          const __m512 f = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[r][1], s[r][2]), s[r][3]), bo);
          _mm512_mask_storeu_ps(dst + r * tl.w, s0, _mm512_permutex2var_ps(e, lo_idx, f));
          if (s1) _mm512_mask_storeu_ps(dst + r * tl.w + 16, s1, _mm512_permutex2var_ps(e, hi_idx, f));
        }
      }
    }
  }
}

#endif

// Set by tests to run the portable transforms on an AVX-512 host.
bool g_portable = false;

bool vectorised() {
#if LIFTOFF_HAVE_AVX512_KERNEL
  return !g_portable && gemm::cpu_has_avx512f();
#else
  return false;
#endif
}

void input_transform(const float* x, int64_t channels, const Tiles& tl, int64_t t0, int64_t t1, float* v,
                     int64_t ldv) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if (vectorised()) return input_transform_avx512(x, channels, tl, t0, t1, v, ldv);
#endif
  input_transform_portable(x, channels, tl, t0, t1, v, ldv);
}

void output_transform(const float* mm, int64_t ldm, int64_t channels, const Tiles& tl, int64_t t0, int64_t t1,
                      const float* bias, float* y) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if (vectorised()) return output_transform_avx512(mm, ldm, channels, tl, t0, t1, bias, y);
#endif
  output_transform_portable(mm, ldm, channels, tl, t0, t1, bias, y);
}

// The convolution of `in` [n, cin, h, w] with the transformed kernel u (16 x cout x cin) into out
// [n, cout, h, w], plus bias.
void convolve(const float* in, int64_t cin, const float* u, int64_t cout, const float* bias, float* out,
              const Conv2dShape& g) {
  const Tiles tl = blocks::make_tiles(g, 2);
  const int64_t nb = blocks::block_tiles(16, cin, cout);
  const int64_t ld = nb + kPad;
  const int64_t blocks = (tl.total + nb - 1) / nb;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    float* v = buffer(0, 16 * cin * ld);
    float* m = buffer(1, 16 * cout * ld);
    for (int64_t b = lo; b < hi; ++b) {
      const int64_t t0 = b * nb, t1 = std::min(tl.total, t0 + nb);
      input_transform(in, cin, tl, t0, t1, v, ld);
      for (int64_t xi = 0; xi < 16; ++xi)
        gemm::matmul<float>(cout, t1 - t0, cin, u + xi * cout * cin, cin, v + xi * cin * ld, ld,
                            m + xi * cout * ld, ld);
      output_transform(m, ld, cout, tl, t0, t1, bias, out);
    }
  });
}

}  // namespace

void use_portable_transforms(bool on) {
  g_portable = on;
}

bool supports(const Conv2dShape& g) {
  // F(4x4) gathers a 16-tile group (up to 16 images) with 32-bit offsets from one image's planes.
  constexpr int64_t kMaxImage = int64_t{1} << 26;
  return g.r == 3 && g.s == 3 && g.stride == 1 && g.padding == 1 && g.oh == g.h && g.ow == g.w &&
         g.c >= kMinChannels && g.k >= kMinChannels && std::max(g.c, g.k) * g.h * g.w <= kMaxImage;
}

namespace {
int mode() {
  static const int m = [] {
    const std::optional<int64_t> v = config::get_int(config::Knob::cpu_winograd);
    if (!v) return 1;
    LIFTOFF_CHECK(*v == 0.0 || *v == 1.0 || *v == 2.0, ValueError, "LIFTOFF_CPU_WINOGRAD=", *v,
                  " is not 0 (off), 1 (gradients) or 2 (all)");
    return static_cast<int>(*v);
  }();
  return m;
}
}  // namespace

bool use_forward(const Conv2dShape& g) {
  return mode() >= 2 && gemm::has_offset_kernel<float>() && supports(g);
}

bool use_backward(const Conv2dShape& g) {
  return mode() >= 1 && gemm::has_offset_kernel<float>() && supports(g);
}

void forward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& g) {
  std::vector<float> u(static_cast<size_t>(16 * g.k * g.c));
  transform_weights(w, g.k, g.c, u.data());
  convolve(x, g.c, u.data(), g.k, bias, y, g);
}

}  // namespace liftoff::cpu::winograd
