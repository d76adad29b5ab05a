// Warp- and block-wide combination of per-thread states (any trivially copyable struct) with a reducer's
// combine(a, b), in a fixed tree order: deterministic for a given block size. Shared by the reductions and
// softmax.
#pragma once
#include <cuda_runtime.h>

namespace liftoff::cuda {

template <class S>
__device__ __forceinline__ S shuffle_down(S s, int offset) {
  constexpr int kWords = (sizeof(S) + 3) / 4;
  int words[kWords] = {};
  memcpy(words, &s, sizeof(S));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = __shfl_down_sync(0xffffffffu, words[w], offset);
  memcpy(&s, words, sizeof(S));
  return s;
}

// The combination of the warp's 32 states, valid in lane 0.
template <class R, class S>
__device__ __forceinline__ S warp_combine(const R& r, S s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s = r.combine(s, shuffle_down(s, offset));
  return s;
}

// The combination of the block's states (blockDim.x a multiple of 32, at most 1024), valid in thread 0.
template <class R, class S>
__device__ S block_combine(const R& r, S s) {
  __shared__ S warp_states[32];
  s = warp_combine(r, s);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_states[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < static_cast<int>(blockDim.x / 32) ? warp_states[lane] : r.identity();
    s = warp_combine(r, s);
  }
  return s;
}

// The combination over a group of G threads (32: a warp; blockDim.x: the block), valid in the group's first
// thread. Every thread of the block must call it when G is the block.
template <int G, class R, class S>
__device__ __forceinline__ S group_combine(const R& r, S s) {
  if constexpr (G == 32) {
    return warp_combine(r, s);
  } else {
    return block_combine(r, s);
  }
}

// The group's combination broadcast to every thread of the group (through shared memory for a block).
template <int G, class R, class S>
__device__ __forceinline__ S group_all_combine(const R& r, S s) {
  s = group_combine<G>(r, s);
  if constexpr (G == 32) {
    constexpr int kWords = (sizeof(S) + 3) / 4;
    int words[kWords] = {};
    memcpy(words, &s, sizeof(S));
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = __shfl_sync(0xffffffffu, words[w], 0, 32);
    memcpy(&s, words, sizeof(S));
    return s;
  } else {
    __shared__ S result;
    __syncthreads();  // every thread has finished reading the previous result
    if (threadIdx.x == 0) result = s;
    __syncthreads();
    return result;
  }
}

}  // namespace liftoff::cuda
