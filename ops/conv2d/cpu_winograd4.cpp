// Winograd F(4x4, 3x3) for the gradients of f32 3x3 "same" convolutions on the CPU (see winograd.h).
//
// Matrices (interpolation points 0, 1, -1, 2, -2, infinity):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Output tile (ty, tx) covers rows 4ty .. 4ty+3 and columns 4tx .. 4tx+3 and reads input rows 4ty-1 .. 4ty+4
// (zero outside the image); edge tiles drop what lies past the image. 36 products per 16 outputs instead of
// F(2x2)'s 64, with the blocks, GEMMs and layouts of cpu_winograd.cpp (xi now 0..35).
//
// The transforms work on 16 tiles of a block at a time (one per lane), whatever the map size (7x7 maps have
// only 2 tiles a row): the input pixels of a tile are gathered with per-lane masks for the image edges, so
// the transformed streams are written 16 tiles at a time with aligned stores; the output goes back in row
// segments (Segment). Against F(2x2) for the gradients, batch-128 ResNet-20 training ran 1.05x to 1.08x
// faster (alternating runs).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ops/common/cpu_gemm.h"
#include "ops/conv2d/winograd.h"
#include "ops/conv2d/winograd_blocks.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace liftoff::cpu::winograd::f4 {

#if LIFTOFF_HAVE_AVX512_KERNEL
namespace {

constexpr int64_t kXi = 36;
using blocks::buffer;
using blocks::kPad;
using blocks::Tiles;

// 16 tiles of a block, one per lane: the offset of pixel (4ty + shift, 4tx + shift) of each tile from the
// plane of channel 0 of the group's first image (planes of `channels` channels), and per row / column
// position p of the tile whether 4ty + shift + p (4tx + shift + p) lies inside the image. Lanes past the
// block's end have empty masks.
struct Group {
  int64_t img0;
  __m512i origin;
  __mmask16 row[6], col[6];
};

__attribute__((target("avx512f"))) Group make_group(const Tiles& tl, int64_t channels, int64_t t, int64_t t1,
                                                    int64_t shift) {
  Group gr{};
  gr.img0 = t / tl.per_image;
  int64_t ty = t % tl.per_image / tl.tw, tx = t % tl.tw, img = 0;  // counted on: no divisions per lane
  alignas(64) int32_t origin[16] = {};
  for (int64_t l = 0; l < 16 && t + l < t1; ++l) {
    const int64_t y0 = 4 * ty + shift, x0 = 4 * tx + shift;
    origin[l] = static_cast<int32_t>(img * channels * tl.h * tl.w + y0 * tl.w + x0);
    for (int p = 0; p < 6; ++p) {
      if (y0 + p >= 0 && y0 + p < tl.h) gr.row[p] = static_cast<__mmask16>(gr.row[p] | (1u << l));
      if (x0 + p >= 0 && x0 + p < tl.w) gr.col[p] = static_cast<__mmask16>(gr.col[p] | (1u << l));
    }
    if (++tx == tl.tw) {
      tx = 0;
      if (++ty == tl.th) ty = 0, ++img;
    }
  }
  gr.origin = _mm512_load_si512(origin);
  return gr;
}

// o = B^T d for six vectors.
__attribute__((target("avx512f"))) inline void apply_bt(const __m512* d, __m512* o) {
  const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f);
  o[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2], d[4]));
  const __m512 s12 = _mm512_add_ps(d[1], d[2]), s34 = _mm512_add_ps(d[3], d[4]);
  o[1] = _mm512_fnmadd_ps(four, s12, s34);
  const __m512 d12 = _mm512_sub_ps(d[1], d[2]), d43 = _mm512_sub_ps(d[4], d[3]);
  o[2] = _mm512_fmadd_ps(four, d12, d43);
  const __m512 e42 = _mm512_sub_ps(d[4], d[2]), d31 = _mm512_sub_ps(d[3], d[1]);
  o[3] = _mm512_fmadd_ps(two, d31, e42);
  o[4] = _mm512_fnmadd_ps(two, d31, e42);
  o[5] = _mm512_fmadd_ps(four, d[1], _mm512_fnmadd_ps(five, d[3], d[5]));
}

// o = A^T m for six vectors (four results).
__attribute__((target("avx512f"))) inline void apply_at(const __m512* m, __m512* o) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
  o[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
  o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d, b);
  o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), c, a);
  o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d, b), m[5]);
}

// o = A e for four vectors (six results): the adjoint of apply_at.
__attribute__((target("avx512f"))) inline void apply_a(const __m512* e, __m512* o) {
  const __m512 s02 = _mm512_add_ps(e[0], e[2]), s13 = _mm512_add_ps(e[1], e[3]);
  const __m512 f02 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), e[2], e[0]);
  const __m512 f13 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), e[3], e[1]);
  o[0] = e[0];
  o[1] = _mm512_add_ps(s02, s13);
  o[2] = _mm512_sub_ps(s02, s13);
  o[3] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), f13, f02);
  o[4] = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), f13, f02);
  o[5] = e[3];
}

// V[xi][c][j] = (B^T d B)[xi] for the tiles [t0, t1) of x [n, channels, h, w]; ldv = the block's NB + kPad.
__attribute__((target("avx512f"))) void input_transform(const float* x, int64_t channels, const Tiles& tl,
                                                        int64_t t0, int64_t t1, float* v, int64_t ldv) {
  const int64_t xs = channels * ldv;
  const int w = static_cast<int>(tl.w);
  for (int64_t t = t0; t < t1; t += 16) {
    const Group gr = make_group(tl, channels, t, t1, -1);
    float* dst = v + (t - t0);
    for (int64_t c = 0; c < channels; ++c) {
      const float* base = x + (gr.img0 * channels + c) * tl.h * tl.w;
      __m512 rows[6][6];  // B^T applied along each input row
      for (int i = 0; i < 6; ++i) {
        __m512 d[6];
        const __m512i at = _mm512_add_epi32(gr.origin, _mm512_set1_epi32(i * w));
        for (int k = 0; k < 6; ++k)
          d[k] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), static_cast<__mmask16>(gr.row[i] & gr.col[k]),
                                          _mm512_add_epi32(at, _mm512_set1_epi32(k)), base, 4);
        apply_bt(d, rows[i]);
      }
      for (int k = 0; k < 6; ++k) {
        const __m512 col[6] = {rows[0][k], rows[1][k], rows[2][k], rows[3][k], rows[4][k], rows[5][k]};
        __m512 o[6];
        apply_bt(col, o);
        for (int a = 0; a < 6; ++a) _mm512_store_ps(dst + (a * 6 + k) * xs + c * ldv, o[a]);
      }
    }
  }
}

// Where the output rows of a group's 16 tiles go. After the transform, row p of the tiles sits in four
// vectors, vector v holding tiles 4v .. 4v+3 with lane 4t + q = column q of tile 4v + t. A segment is a run
// of those tiles in one tile row: its lanes (kept: inside the image) are contiguous in y, so each goes out as
// one compressed, masked store per row; the image edges only drop lanes.
struct Segment {
  int64_t offset;  // of the first kept pixel of row 0, from the plane of channel 0 of the group's first image
  int64_t rows;    // rows inside the image
  int v;
  __mmask16 keep, stored;
};

int make_segments(const Tiles& tl, int64_t channels, int64_t t, int64_t t1, Segment* seg) {
  int count = 0;
  int64_t ty = t % tl.per_image / tl.tw, tx = t % tl.tw, img = 0;
  for (int64_t l = 0; l < 16 && t + l < t1; ++l) {
    const int v = static_cast<int>(l / 4);
    const int64_t cols = std::min<int64_t>(4, tl.w - 4 * tx);
    const auto lanes = static_cast<__mmask16>(((1u << cols) - 1) << (4 * (l % 4)));
    if (l % 4 == 0 || tx == 0) {  // a new vector or a new tile row
      seg[count++] = {img * channels * tl.h * tl.w + 4 * ty * tl.w + 4 * tx,
                      std::min<int64_t>(4, tl.h - 4 * ty), v, 0, 0};
    }
    seg[count - 1].keep = static_cast<__mmask16>(seg[count - 1].keep | lanes);
    if (++tx == tl.tw) {
      tx = 0;
      if (++ty == tl.th) ty = 0, ++img;
    }
  }
  for (int i = 0; i < count; ++i)
    seg[i].stored = static_cast<__mmask16>((1u << __builtin_popcount(seg[i].keep)) - 1);
  return count;
}

// y[img, o, 4ty + p, 4tx + q] = (A^T M A)[p][q] for the tiles [t0, t1); M[xi][o][j] with ldm = NB + kPad.
// Writing each (p, q) with a 16-lane scatter took 5% of the batch-128 step.
__attribute__((target("avx512f"))) void output_transform(const float* mm, int64_t ldm, int64_t channels,
                                                         const Tiles& tl, int64_t t0, int64_t t1, float* y) {
  const int64_t xs = channels * ldm;
  // Interleave columns q0, q1 (and q2, q3) of tiles 0..7 or 8..15, then pairs of those into 4 tiles x 4.
  const __m512i pair_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i pair_hi = _mm512_add_epi32(pair_lo, _mm512_set1_epi32(8));
  const __m512i quad_lo = _mm512_set_epi32(23, 22, 7, 6, 21, 20, 5, 4, 19, 18, 3, 2, 17, 16, 1, 0);
  const __m512i quad_hi = _mm512_add_epi32(quad_lo, _mm512_set1_epi32(8));
  for (int64_t t = t0; t < t1; t += 16) {
    const int64_t img0 = t / tl.per_image;
    Segment seg[16];
    const int nseg = make_segments(tl, channels, t, t1, seg);
    const float* src = mm + (t - t0);
    for (int64_t o = 0; o < channels; ++o) {
      float* base = y + (img0 * channels + o) * tl.h * tl.w;
      __m512 cols[6][4];  // A^T applied down each column of M
      for (int k = 0; k < 6; ++k) {
        __m512 m[6];
        for (int i = 0; i < 6; ++i) m[i] = _mm512_load_ps(src + (i * 6 + k) * xs + o * ldm);
        apply_at(m, cols[k]);
      }
      for (int p = 0; p < 4; ++p) {
        const __m512 row[6] = {cols[0][p], cols[1][p], cols[2][p], cols[3][p], cols[4][p], cols[5][p]};
        __m512 r[4];
        apply_at(row, r);
        const __m512 p01[2] = {_mm512_permutex2var_ps(r[0], pair_lo, r[1]),
                               _mm512_permutex2var_ps(r[0], pair_hi, r[1])};
        const __m512 p23[2] = {_mm512_permutex2var_ps(r[2], pair_lo, r[3]),
                               _mm512_permutex2var_ps(r[2], pair_hi, r[3])};
        const __m512 out[4] = {
            _mm512_permutex2var_ps(p01[0], quad_lo, p23[0]), _mm512_permutex2var_ps(p01[0], quad_hi, p23[0]),
            _mm512_permutex2var_ps(p01[1], quad_lo, p23[1]), _mm512_permutex2var_ps(p01[1], quad_hi, p23[1])};
        for (int i = 0; i < nseg; ++i) {
          const Segment& sg = seg[i];
          if (p < sg.rows)
            _mm512_mask_storeu_ps(base + sg.offset + p * tl.w, sg.stored,
                                  _mm512_maskz_compress_ps(sg.keep, out[sg.v]));
        }
      }
    }
  }
}

// D[xi][j][k] = (A dY A^T)[xi] for the tiles [t0, t1) of gy [n, channels, h, w], dY the 4x4 output tile
// (zero past the image edge): one tile at a time, 16 channels per vector (gathered across the channel
// planes), so the results are stored channel-contiguous (the tile-major D).
__attribute__((target("avx512f"))) void grad_transform(const float* gy, int64_t channels, const Tiles& tl,
                                                       int64_t t0, int64_t t1, float* d, int64_t ldd) {
  const int64_t xs = ldd * channels;
  const __m512i planes =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(tl.h * tl.w)));
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t img = t / tl.per_image, rem = t % tl.per_image;
    const int64_t y0 = 4 * (rem / tl.tw), x0 = 4 * (rem % tl.tw);
    const int64_t rows = std::min<int64_t>(4, tl.h - y0), cols = std::min<int64_t>(4, tl.w - x0);
    float* out = d + (t - t0) * channels;
    for (int64_t k0 = 0; k0 < channels; k0 += 16) {
      const __mmask16 kmask =
          static_cast<__mmask16>(channels - k0 >= 16 ? 0xFFFF : (1u << (channels - k0)) - 1);
      const float* base = gy + ((img * channels + k0) * tl.h + y0) * tl.w + x0;
      __m512 cols6[4][6];  // A applied down each column of dY
      for (int q = 0; q < 4; ++q) {
        __m512 e[4];
        for (int p = 0; p < 4; ++p)
          e[p] = p < rows && q < cols
                     ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), kmask, planes, base + p * tl.w + q, 4)
                     : _mm512_setzero_ps();
        apply_a(e, cols6[q]);
      }
      for (int i = 0; i < 6; ++i) {
        const __m512 e[4] = {cols6[0][i], cols6[1][i], cols6[2][i], cols6[3][i]};
        __m512 o[6];
        apply_a(e, o);
        for (int j = 0; j < 6; ++j) _mm512_mask_storeu_ps(out + (i * 6 + j) * xs + k0, kmask, o[j]);
      }
    }
  }
}

// U[xi][o][i] = (G g G^T)[xi] with g[r][s] = w[i, o, 2-r, 2-s] (the input gradient's flipped kernel,
// channels swapped); w is [K, C, 3, 3], cout = C, cin = K. Blocks of kSide x kSide (o, i): w is read in runs
// of kSide * 9 floats and U written in runs of kSide floats (a cache line). Walking i for one o read w at a
// stride of C * 9 floats and was 22% of ResNet-18's CPU step (512-channel layers).
constexpr int64_t kSide = 16;
void transform_flipped_weights(const float* w, int64_t cout, int64_t cin, float* u) {
  constexpr float k6 = 1.0f / 6, k12 = 1.0f / 12, k24 = 1.0f / 24;
  // G applied to three values a, b, c (a column or a row of the flipped 3 x 3 kernel), for kSide inputs at
  // once (innermost: vectorised; one input at a time the scalar transform was 5% of ResNet-18's CPU step).
  const auto apply_g = [](const float(*a)[kSide], const float(*b)[kSide], const float(*c)[kSide],
                          float(*o[6])[kSide]) {
    for (int64_t l = 0; l < kSide; ++l) {
      const float x = (*a)[l], y = (*b)[l], z = (*c)[l];
      (*o[0])[l] = 0.25f * x;
      (*o[1])[l] = -k6 * (x + y + z);
      (*o[2])[l] = -k6 * (x - y + z);
      (*o[3])[l] = k24 * x + k12 * y + k6 * z;
      (*o[4])[l] = k24 * x - k12 * y + k6 * z;
      (*o[5])[l] = z;
    }
  };
  const int64_t o_blocks = (cout + kSide - 1) / kSide;
  parallel_for(0, o_blocks, 1, [&](int64_t b_lo, int64_t b_hi) {
    std::vector<float> staged(static_cast<size_t>(kXi * kSide * kSide));  // [xi][o][i] of one block
    float g[3][3][kSide], q[6][3][kSide], v[6][6][kSide];
    for (int64_t ob = b_lo; ob < b_hi; ++ob) {
      const int64_t o0 = ob * kSide, on = std::min(kSide, cout - o0);
      for (int64_t i0 = 0; i0 < cin; i0 += kSide) {
        const int64_t in = std::min(kSide, cin - i0);
        for (int64_t ol = 0; ol < on; ++ol) {
          for (int64_t il = 0; il < kSide; ++il) {  // the flipped kernels of kSide inputs, side by side
            const float* src = w + ((i0 + std::min(il, in - 1)) * cout + o0 + ol) * 9;
            for (int r = 0; r < 3; ++r)
              for (int t = 0; t < 3; ++t) g[r][t][il] = src[(2 - r) * 3 + (2 - t)];
          }
          for (int t = 0; t < 3; ++t) {  // G along the columns: q[r][t] = (G g)[r][t]
            float(*out[6])[kSide] = {&q[0][t], &q[1][t], &q[2][t], &q[3][t], &q[4][t], &q[5][t]};
            apply_g(&g[0][t], &g[1][t], &g[2][t], out);
          }
          for (int r = 0; r < 6; ++r) {  // then along the rows: v[r][t] = (G g G^T)[r][t]
            float(*out[6])[kSide] = {&v[r][0], &v[r][1], &v[r][2], &v[r][3], &v[r][4], &v[r][5]};
            apply_g(&q[r][0], &q[r][1], &q[r][2], out);
          }
          for (int r = 0; r < 6; ++r)
            for (int t = 0; t < 6; ++t)
              std::copy(v[r][t], v[r][t] + in,
                        staged.data() + static_cast<size_t>(((r * 6 + t) * kSide + ol) * kSide));
        }
        for (int64_t xi = 0; xi < kXi; ++xi) {
          for (int64_t ol = 0; ol < on; ++ol) {
            const float* from = staged.data() + (xi * kSide + ol) * kSide;
            std::copy(from, from + in, u + (xi * cout + o0 + ol) * cin + i0);
          }
        }
      }
    }
  });
}

}  // namespace

bool available() {
  return gemm::cpu_has_avx512f();
}

void input_grad(const float* gy, const float* w, float* gx, const Conv2dShape& g) {
  // Reused across calls (grown, never shrunk; every element is written below): 36 x C x K floats are 38 MB
  // at 512 channels, and a fresh zeroed vector each call cost page faults and a zeroing pass.
  thread_local std::vector<float> u_buffer;
  if (u_buffer.size() < static_cast<size_t>(kXi * g.c * g.k))
    u_buffer.resize(static_cast<size_t>(kXi * g.c * g.k));
  // A plain pointer for the pool's threads: naming the thread_local inside their lambda would be theirs.
  const float* const u = u_buffer.data();
  transform_flipped_weights(w, g.c, g.k, u_buffer.data());
  const Tiles tl = blocks::make_tiles(g, 4);
  const int64_t nb = blocks::block_tiles(kXi, g.k, g.c);
  const int64_t ld = nb + kPad;
  const int64_t blocks = (tl.total + nb - 1) / nb;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    float* v = buffer(0, kXi * g.k * ld);
    float* m = buffer(1, kXi * g.c * ld);
    for (int64_t b = lo; b < hi; ++b) {
      const int64_t t0 = b * nb, t1 = std::min(tl.total, t0 + nb);
      input_transform(gy, g.k, tl, t0, t1, v, ld);
      for (int64_t xi = 0; xi < kXi; ++xi)
        gemm::matmul<float>(g.c, t1 - t0, g.k, u + xi * g.c * g.k, g.k, v + xi * g.k * ld, ld,
                            m + xi * g.c * ld, ld);
      output_transform(m, ld, g.c, tl, t0, t1, gx);
    }
  });
}

void weight_grad(const float* x, const float* gy, float* gw, const Conv2dShape& g) {
  const Tiles tl = blocks::make_tiles(g, 4);
  const int64_t nb = blocks::block_tiles(kXi, g.c, g.k);
  const int64_t blocks = (tl.total + nb - 1) / nb;
  // Fixed block ranges with one partial dU^T each (36 x C x K), summed in order: deterministic for a given
  // thread count.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(blocks, num_threads()));
  const int64_t part_size = kXi * g.c * g.k;
  // Reused across calls (grown, never shrunk): 36 x C x K floats a chunk is 38 MB at 512 channels, and a
  // fresh zeroed vector each call cost page faults and a zeroing pass. Each chunk's first block writes its
  // partial.
  thread_local std::vector<float> parts_buffer;
  if (parts_buffer.size() < static_cast<size_t>(chunks * part_size))
    parts_buffer.resize(static_cast<size_t>(chunks * part_size));
  std::vector<float>& parts = parts_buffer;
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    const int64_t ld = nb + kPad;
    float* v = buffer(0, kXi * g.c * ld);
    float* d = buffer(1, kXi * g.k * ld);
    for (int64_t chunk = lo; chunk < hi; ++chunk) {
      float* part = parts.data() + chunk * part_size;
      const int64_t first_block = blocks * chunk / chunks;
      for (int64_t b = first_block; b < blocks * (chunk + 1) / chunks; ++b) {
        const int64_t t0 = b * nb, t1 = std::min(tl.total, t0 + nb);
        input_transform(x, g.c, tl, t0, t1, v, ld);
        grad_transform(gy, g.k, tl, t0, t1, d, ld);
        for (int64_t xi = 0; xi < kXi; ++xi)
          gemm::matmul<float>(g.c, g.k, t1 - t0, v + xi * g.c * ld, ld, d + xi * ld * g.k, g.k,
                              part + xi * g.c * g.k, g.k, /*accumulate=*/b != first_block);
      }
    }
  });
  // gw[k, c] = G^T dU G, dU[xi] = the partials' [xi][c][k] summed in chunk order; split across the threads
  // by c. Per channel c, kSide filters at a time: the partials are read in runs of kSide (they are
  // [xi][c][k]; one k at a time read them at a stride of K floats: 18% of ResNet-18's CPU step), and both
  // halves of the transform run across those kSide filters (innermost: vectorised; one filter at a time the
  // scalar transform was 13% of the step).
  constexpr float k6 = 1.0f / 6, k12 = 1.0f / 12, k24 = 1.0f / 24;
  parallel_for(0, g.c, 1, [&](int64_t c_lo, int64_t c_hi) {
    float x[kXi][kSide], p[3][6][kSide], o[3][3][kSide];
    for (int64_t c = c_lo; c < c_hi; ++c) {
      for (int64_t k0 = 0; k0 < g.k; k0 += kSide) {
        const int64_t kn = std::min(kSide, g.k - k0);
        for (int64_t xi = 0; xi < kXi; ++xi) {
          const size_t at = static_cast<size_t>((xi * g.c + c) * g.k + k0);
          for (int64_t kl = 0; kl < kSide; ++kl)
            x[xi][kl] = kl < kn ? parts[at + static_cast<size_t>(kl)] : 0.f;
          for (int64_t chunk = 1; chunk < chunks; ++chunk) {
            const float* more = parts.data() + chunk * part_size + at;
            for (int64_t kl = 0; kl < kn; ++kl) x[xi][kl] += more[kl];
          }
        }
        // G^T along the rows of each 6 x 6 tile (x[r * 6 + s]), then along the columns.
        for (int s = 0; s < 6; ++s) {
          for (int64_t kl = 0; kl < kSide; ++kl) {
            const float x0 = x[s][kl], x1 = x[6 + s][kl], x2 = x[12 + s][kl], x3 = x[18 + s][kl],
                        x4 = x[24 + s][kl], x5 = x[30 + s][kl];
            p[0][s][kl] = 0.25f * x0 - k6 * (x1 + x2) + k24 * (x3 + x4);
            p[1][s][kl] = k6 * (x2 - x1) + k12 * (x3 - x4);
            p[2][s][kl] = k6 * (x3 + x4 - x1 - x2) + x5;
          }
        }
        for (int r = 0; r < 3; ++r) {
          for (int64_t kl = 0; kl < kSide; ++kl) {
            const float y0 = p[r][0][kl], y1 = p[r][1][kl], y2 = p[r][2][kl], y3 = p[r][3][kl],
                        y4 = p[r][4][kl], y5 = p[r][5][kl];
            o[r][0][kl] = 0.25f * y0 - k6 * (y1 + y2) + k24 * (y3 + y4);
            o[r][1][kl] = k6 * (y2 - y1) + k12 * (y3 - y4);
            o[r][2][kl] = k6 * (y3 + y4 - y1 - y2) + y5;
          }
        }
        for (int64_t kl = 0; kl < kn; ++kl) {
          float* out = gw + ((k0 + kl) * g.c + c) * 9;
          for (int r = 0; r < 3; ++r)
            for (int t = 0; t < 3; ++t) out[r * 3 + t] = o[r][t][kl];
        }
      }
    }
  });
}
#else
// Without the AVX-512 kernel use_backward() is false and these are never called.
bool available() {
  return false;
}
void input_grad(const float*, const float*, float*, const Conv2dShape&) {}
void weight_grad(const float*, const float*, float*, const Conv2dShape&) {}
#endif

}  // namespace liftoff::cpu::winograd::f4
