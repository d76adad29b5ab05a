// The alternative fused layer norm backward kernels for 16-bit data (backward_variant.h: packed, two_rows,
// wide), one template: groups of G threads, E values a thread in 16-byte packs, R rows a group per round.
// What they change against backward_tile_kernel (cuda_backward.cu), to keep more bytes of gy and x in
// flight an SM: the rows are held as loaded (16-bit, half the registers of f32 values) and converted where
// used, before and after the row reduction, so a thread can hold the next round's 2 * R * E values
// in flight while it works on this round's; the per-thread column sums live in shared memory as float4
// (one 16-byte access per 4 values, conflict-free) and take the R rows' sum in one update. Included by
// cuda_backward.cu only.
#pragma once
#include "ops/layer_norm/backward_variant.h"
#include "ops/layer_norm/cuda_common.cuh"

namespace liftoff::cuda::row_norm_kernels {

// Each row's sum(g) and sum(g * xhat) of one round, reduced over the group together.
template <int R>
struct RowSums {
  float g[R], gx[R];
};

template <int R>
__device__ __forceinline__ RowSums<R> operator+(RowSums<R> a, const RowSums<R>& b) {
#pragma unroll
  for (int k = 0; k < R; ++k) {
    a.g[k] += b.g[k];
    a.gx[k] += b.gx[k];
  }
  return a;
}

// A row's packs as loaded, in 32-bit words (two 16-bit values a word: 16-bit values held one to a
// register would take twice the registers).
template <int kPacks>
struct HeldRow {
  uint4 p[kPacks];
};

__device__ __forceinline__ unsigned word_of(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// The two values of a word (the first in the low half) as floats, and back (rounded to nearest).
template <class T>
__device__ __forceinline__ float2 unpack_word(unsigned w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    __half2 h;
    memcpy(&h, &w, sizeof(w));
    return __half22float2(h);
  }
}

template <class T>
__device__ __forceinline__ unsigned pack_word(float low, float high) {
  unsigned w;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
    memcpy(&w, &v, sizeof(w));
  } else {
    const __half2 v = __floats2half2_rn(low, high);
    memcpy(&w, &v, sizeof(w));
  }
  return w;
}

// Hides what the compiler knows of a held row's bits (an empty asm that "changes" each word), so values
// converted from it before the reduction are converted again after it instead of kept in f32 registers
// across it, which would undo holding the row 16-bit.
template <int kPacks>
__device__ __forceinline__ void forget(HeldRow<kPacks>& row) {
#pragma unroll
  for (uint4& q : row.p) asm volatile("" : "+r"(q.x), "+r"(q.y), "+r"(q.z), "+r"(q.w));
}

// Registers the held packs take (current and next round's gy and x, the weight): 32-bit words a thread.
template <int E, int R>
constexpr int held_words() {
  return 2 * R * E + E / 2;
}

// Blocks an SM the register cap allows without spills (-Xptxas -v, CUDA 13, sm_90): 3 (80 registers) for up
// to 40 held words (packed, two_rows at 8 values: 64 bytes of gy and x in flight a thread), 2 (128
// registers) beyond (wide, two_rows at 16 values: 128 bytes a thread). At 4 blocks (64 registers) the
// 40-word kernels spill 44-96 bytes.
template <int E, int R>
constexpr int rows_min_blocks() {
  return held_words<E, R>() <= 40 ? 3 : 2;
}

// Shared memory of backward_rows_kernel's column sums: weight then bias sums, E floats a thread each.
template <int E>
constexpr int rows_shared_bytes() {
  return 2 * E * kBlock * static_cast<int>(sizeof(float));
}

// Writes a block's column sums (thread t's value e at quad e / 4 of column_sums[quad * kBlock + t]; value e
// is column ((e / 8) * G + lane) * 8 + e % 8) into out[col], the groups of the block added in group order
// (deterministic); consecutive threads write consecutive columns. Call after a barrier that follows the
// last update.
template <int G>
__device__ __forceinline__ void store_packed_column_sums(const float4* column_sums, float* out,
                                                         int64_t cols) {
  constexpr int V = 8, kGroupsPerBlock = kBlock / G;
  const float* sums = reinterpret_cast<const float*>(column_sums);
  for (int64_t col = threadIdx.x; col < cols; col += kBlock) {
    const int64_t pack = col / V;
    const int lane = static_cast<int>(pack % G);
    const int e = static_cast<int>(pack / G) * V + static_cast<int>(col % V);
    const int slot = (e / 4) * kBlock * 4 + e % 4;
    float total = sums[slot + lane * 4];
    for (int k = 1; k < kGroupsPerBlock; ++k) total += sums[slot + (k * G + lane) * 4];
    out[col] = total;
  }
}

// One pass over gy and x: gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * weight, and the
// block's per-column sums of gy * xhat and gy into partials [2][gridDim.x][cols] for finish_kernel. One
// wave of blocks; the group's rows of a round are first + (round * R + k) * groups, k < R. Pack p of a
// thread is pack p * G + lane of the row (coalesced). Rows of 16-bit values, cols a multiple of 8 and every
// pointer 16-byte aligned; dynamic shared memory rows_shared_bytes<E>().
template <int G, int E, int R, class T>
__global__ void __launch_bounds__(kBlock, rows_min_blocks<E, R>())
    backward_rows_kernel(const T* gy, const T* x, const float* mean, const float* rstd, const T* weight,
                         T* gx, float* partials, int64_t rows, int64_t cols) {
  static_assert(sizeof(T) == 2, "16-bit data");
  constexpr int V = 8, kPacks = E / V, kQuads = E / 4, kGroupsPerBlock = kBlock / G;
  using Held = HeldRow<kPacks>;
  extern __shared__ float4 backward_rows_sums[];
  __shared__ RowSums<R> scratch[kBlock / kWarp];
  const int lane = threadIdx.x % G;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * kGroupsPerBlock;
  const int64_t first = blockIdx.x * static_cast<int64_t>(kGroupsPerBlock) + threadIdx.x / G;
  const float count = static_cast<float>(cols);
  float4* const my_w = backward_rows_sums + threadIdx.x;  // quad q at my_w[q * kBlock]
  float4* const my_b = backward_rows_sums + kQuads * kBlock + threadIdx.x;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) my_w[q * kBlock] = my_b[q * kBlock] = make_float4(0.f, 0.f, 0.f, 0.f);
  auto inside = [&](int p) { return (static_cast<int64_t>(p) * G + lane) * V < cols; };
  auto fetch = [&](const T* row, Held& held) {
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
      if (inside(p)) held.p[p] = reinterpret_cast<const uint4*>(row)[static_cast<int64_t>(p) * G + lane];
  };
  Held weight_held;
  if (weight != nullptr) fetch(weight, weight_held);
  Held gy_next[R], x_next[R];
  float mu_next[R] = {}, r_next[R] = {};
  auto fetch_rows = [&](int64_t base) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int64_t row = base + k * groups;
      if (row >= rows) continue;
      fetch(gy + row * cols, gy_next[k]);
      fetch(x + row * cols, x_next[k]);
      mu_next[k] = mean[row];
      r_next[k] = rstd[row];
    }
  };
  // Values 2i and 2i + 1 of pack p: gy, xhat and the weight.
  auto pair_at = [&](const Held& held, int p, int i) { return unpack_word<T>(word_of(held.p[p], i)); };
  auto weight_pair = [&](int p, int i) {
    return weight != nullptr ? pair_at(weight_held, p, i) : make_float2(1.f, 1.f);
  };
  const int64_t step = groups * R;
  fetch_rows(first);
  // Every thread runs the same rounds: the group reductions synchronise the block when G > 32.
  const int64_t rounds = (rows + step - 1) / step;
#pragma unroll 1
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t base = first + round * step;
    Held gy_held[R], x_held[R];
    float mu[R], r[R];
    bool active[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
      active[k] = base + k * groups < rows;
      gy_held[k] = gy_next[k];
      x_held[k] = x_next[k];
      mu[k] = mu_next[k];
      r[k] = r_next[k];
    }
    if (round + 1 < rounds) fetch_rows(base + step);
    forget(weight_held);  // converted where used, not hoisted out of the loop as f32
    RowSums<R> sums{};
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      if (!inside(p)) continue;
#pragma unroll
      for (int i = 0; i < V / 4; ++i) {  // quads of the pack: words 2i and 2i + 1
        float4 w_sum = make_float4(0.f, 0.f, 0.f, 0.f), b_sum = w_sum;
#pragma unroll
        for (int k = 0; k < R; ++k) {
          if (!active[k]) continue;
          const float2 g01 = pair_at(gy_held[k], p, 2 * i), g23 = pair_at(gy_held[k], p, 2 * i + 1);
          const float2 x01 = pair_at(x_held[k], p, 2 * i), x23 = pair_at(x_held[k], p, 2 * i + 1);
          const float2 w01 = weight_pair(p, 2 * i), w23 = weight_pair(p, 2 * i + 1);
          const float g[4] = {g01.x, g01.y, g23.x, g23.y}, xv[4] = {x01.x, x01.y, x23.x, x23.y};
          const float wv[4] = {w01.x, w01.y, w23.x, w23.y};
          float xhat[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            xhat[j] = (xv[j] - mu[k]) * r[k];
            sums.g[k] += g[j] * wv[j];
            sums.gx[k] += g[j] * wv[j] * xhat[j];
          }
          w_sum.x += g[0] * xhat[0], w_sum.y += g[1] * xhat[1], w_sum.z += g[2] * xhat[2];
          w_sum.w += g[3] * xhat[3];
          b_sum.x += g[0], b_sum.y += g[1], b_sum.z += g[2], b_sum.w += g[3];
        }
        float4& w = my_w[(p * (V / 4) + i) * kBlock];
        float4& b = my_b[(p * (V / 4) + i) * kBlock];
        float4 wv = w, bv = b;
        wv.x += w_sum.x, wv.y += w_sum.y, wv.z += w_sum.z, wv.w += w_sum.w;
        bv.x += b_sum.x, bv.y += b_sum.y, bv.z += b_sum.z, bv.w += b_sum.w;
        w = wv;
        b = bv;
      }
    }
    sums = group_all_reduce<G>(sums, AddOp{}, scratch);
    forget(weight_held);
#pragma unroll
    for (int k = 0; k < R; ++k) {
      forget(gy_held[k]);
      forget(x_held[k]);
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
      if (!active[k]) continue;
      const float mean_g = sums.g[k] / count, mean_gx = sums.gx[k] / count;
      uint4* const out = reinterpret_cast<uint4*>(gx + (base + k * groups) * cols);
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if (!inside(p)) continue;
        unsigned words[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 g = pair_at(gy_held[k], p, i), xv = pair_at(x_held[k], p, i), w = weight_pair(p, i);
          const float xhat0 = (xv.x - mu[k]) * r[k], xhat1 = (xv.y - mu[k]) * r[k];
          words[i] = pack_word<T>(r[k] * (g.x * w.x - mean_g - xhat0 * mean_gx),
                                  r[k] * (g.y * w.y - mean_g - xhat1 * mean_gx));
        }
        out[static_cast<int64_t>(p) * G + lane] = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
  }
  __syncthreads();
  store_packed_column_sums<G>(backward_rows_sums, partials + blockIdx.x * cols, cols);
  store_packed_column_sums<G>(backward_rows_sums + kQuads * kBlock,
                              partials + (gridDim.x + blockIdx.x) * cols, cols);
}

// The smallest group of G >= 32 threads whose tile holds the row, for rows of kLower + 1 .. kRowsVariantMax
// values (no tile outside that range is instantiated); launch(G, E, R).
constexpr int64_t kRowsVariantMin = 513, kRowsVariantMax = 4096;

template <int G, int E, int R, int64_t kLower, class Launch>
void launch_rows_group(int64_t cols, Launch&& launch) {
  using std::integral_constant;
  static_assert(G <= kBlock, "a group fits a block");
  if constexpr (int64_t{G} * E <= kLower) {
    launch_rows_group<G * 2, E, R, kLower>(cols, launch);
  } else if constexpr (int64_t{G} * E >= kRowsVariantMax || G == kBlock) {  // holds every row it gets
    launch(integral_constant<int, G>{}, integral_constant<int, E>{}, integral_constant<int, R>{});
  } else if (cols <= int64_t{G} * E) {
    launch(integral_constant<int, G>{}, integral_constant<int, E>{}, integral_constant<int, R>{});
  } else {
    launch_rows_group<G * 2, E, R, kLower>(cols, launch);
  }
}

// The variant's tile for 16-bit layer norm rows of 513..4096 values read as 16-byte packs (cols a multiple
// of 8, every pointer aligned): launch(G, E, R) and true; false for `tile`, other rows and dtypes (the tile
// kernel then).
template <class T, class Launch>
bool launch_backward_rows(LayerNormBackward variant, const RowNormShape& s,
                          std::initializer_list<const void*> pointers, Launch&& launch) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    const bool applies = variant != LayerNormBackward::tile && variant != LayerNormBackward::automatic &&
                         s.groups == 1 && s.inner == 1 && s.cols >= kRowsVariantMin &&
                         s.cols <= kRowsVariantMax && use_vectors<T>(s, pointers);
    if (!applies) return false;
    constexpr int64_t kLower = kRowsVariantMin - 1;
    if (variant == LayerNormBackward::packed) {
      launch_rows_group<kWarp, 16, 1, kLower>(s.cols, launch);
    } else if (variant == LayerNormBackward::wide) {
      launch_rows_group<kWarp, 32, 1, kLower>(s.cols, launch);
    } else if (s.cols <= 2048) {  // two_rows: the tile kernel's E
      launch_rows_group<kWarp, 8, 2, kLower>(s.cols, launch);
    } else {
      launch_rows_group<kWarp, 16, 2, 2048>(s.cols, launch);
    }
    return true;
  }
}

}  // namespace liftoff::cuda::row_norm_kernels
