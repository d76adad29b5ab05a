// Pieces shared by the CUDA layer/group norm kernels (cuda_forward.cu, cuda_backward.cu; kernels.h): the
// affine index, per-row sums and value visits of the looping kernels, the launch choices (register tiles,
// 16-byte packs, threads per row).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/common/row_tile.cuh"
#include "ops/layer_norm/kernels.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda::row_norm_kernels {
constexpr int kWarp = 32;

// Where a value's affine parameter is: per_column (layer norm: the column) or per channel (group norm).
struct Affine {
  int64_t groups, per_group, inner;
  bool per_column;
  __device__ __forceinline__ int64_t index(int64_t row, int64_t col) const {
    return per_column ? col : (row % groups) * per_group + col / inner;
  }
};

// Sums v over the TPR threads of a row (rows are aligned groups of TPR threads of one block), in a fixed
// order; every thread of the row gets the sum. scratch: TPR / 32 values per row of the block. All threads of
// the block must call it (it synchronizes when a row spans warps).
template <int TPR, class A>
__device__ __forceinline__ A row_sum(A v, A* scratch) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if constexpr (TPR > kWarp) {
    constexpr int kWarps = TPR / kWarp;
    const int lane = threadIdx.x % kWarp, warp_in_row = (threadIdx.x % TPR) / kWarp;
    A* row_scratch = scratch + (threadIdx.x / TPR) * kWarps;
    if (lane == 0) row_scratch[warp_in_row] = v;
    __syncthreads();
    v = A(0);
    for (int w = 0; w < kWarps; ++w) v += row_scratch[w];
    __syncthreads();  // the scratch is reused by the next call
  }
  return v;
}

// Visits the values of one row: fn(col, value) for each column this thread owns, reading 16-byte packs
// when `vec` (cols a multiple of the pack and the row 16-byte aligned).
template <class T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <int TPR, class T, class Fn>
__device__ __forceinline__ void for_row(const T* row, int64_t cols, bool vec, Fn&& fn) {
  const int t = threadIdx.x % TPR;
  if (vec) {
    constexpr int kSize = Pack<T>::kSize;
    const auto* packs = reinterpret_cast<const Pack<T>*>(row);
    for (int64_t p = t; p < cols / kSize; p += TPR) {
      const Pack<T> pk = packs[p];
#pragma unroll
      for (int e = 0; e < kSize; ++e) fn(p * kSize + e, pk.v[e]);
    }
  } else {
    for (int64_t j = t; j < cols; j += TPR) fn(j, row[j]);
  }
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// 16-byte packs: every row starts on a pack boundary and every pointer read by packs is aligned.
template <class T>
bool use_vectors(const RowNormShape& s, std::initializer_list<const void*> pointers) {
  if (s.cols % Pack<T>::kSize != 0) return false;
  for (const void* p : pointers)
    if (p != nullptr && !aligned16(p)) return false;
  return true;
}

inline Affine affine_of(const RowNormShape& s) {
  return Affine{s.groups, s.affine_per_group(), s.inner, s.groups == 1 && s.inner == 1};
}

// Launches kernel<32> (a warp per row) for rows up to 1024 values, kernel<256> (a block per row) beyond.
template <class Launch>
void by_row_width(const RowNormShape& s, Launch&& launch) {
  if (s.cols <= 1024) {
    launch(std::integral_constant<int, kWarp>{});
  } else {
    launch(std::integral_constant<int, kBlock>{});
  }
}

// Runs launch(G, E, V) for layer norm rows (per-column affine) that fit a register tile; false otherwise.
template <class T, class Launch>
bool launch_tile(const RowNormShape& s, std::initializer_list<const void*> pointers, Launch&& launch) {
  if (s.groups != 1 || s.inner != 1 || s.cols == 0) return false;
  return dispatch_row_tile<T>(s.cols, [&](auto g, auto e) {
    dispatch_pack<T, decltype(e)::value>(s.cols, pointers, [&](auto v) { launch(g, e, v); });
  });
}

}  // namespace liftoff::cuda::row_norm_kernels
