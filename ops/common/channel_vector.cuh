// V consecutive values of a channels-last row moved as one access: 16 bytes (or fewer) per load or store
// when the caller has checked that C is a multiple of V and the pointers are aligned to V * sizeof(T) (capped
// at 16 bytes; wider packs, such as 8 int64 indices, become several 16-byte accesses). Converts to and from
// an accumulation type A (float for the half types). Used by the NHWC kernels of conv2d (depthwise) and
// max_pool2d.
#pragma once
#include <cstddef>

#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

template <class T, int V>
struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) ChannelPack {
  T v[V];
};

template <int V, class T, class A>
__device__ __forceinline__ void load_channels(const T* p, A (&out)[V]) {
  const ChannelPack<T, V> packed = *reinterpret_cast<const ChannelPack<T, V>*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = convert<A>(packed.v[j]);
}

template <int V, class T, class A>
__device__ __forceinline__ void store_channels(T* p, const A (&in)[V]) {
  ChannelPack<T, V> packed;
#pragma unroll
  for (int j = 0; j < V; ++j) packed.v[j] = convert<T>(in[j]);
  *reinterpret_cast<ChannelPack<T, V>*>(p) = packed;
}

// The vector width for T: 16 bytes' worth of values.
template <class T>
constexpr int kChannelVector = static_cast<int>(16 / sizeof(T)) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;

// True when `channels` values per row allow packs of `width` and `p` is aligned for them.
inline bool channel_pack_fits(const void* p, long long channels, int width, size_t element_bytes) {
  const size_t bytes = static_cast<size_t>(width) * element_bytes;
  const size_t alignment = bytes < 16 ? bytes : 16;
  return channels % width == 0 && reinterpret_cast<size_t>(p) % alignment == 0;
}

}  // namespace liftoff::cuda
