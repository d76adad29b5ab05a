// CUDA kernels over an ElementwisePlan: out[i] = f(inputs at i...), computed in each input's accumulation
// type (f32 for f16/bf16). Dense plans run a vectorised kernel (16-byte loads and stores where every pointer
// is aligned); others (broadcast, strided) a rows kernel: the output as rows of the plan's innermost
// dimension, 16-byte packs of outputs inside a row when the row length allows, each input read by pack,
// by one value per row (a broadcast along the row) or element by element (row_indexer.h), index math once
// per pack (multiply-high divisions when every index fits 31 bits). Grid-stride loops on the compute stream.
#pragma once
#include <algorithm>
#include <utility>

#include "ops/common/elementwise.h"
#include "ops/common/row_indexer.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

// One input of an elementwise kernel: a tensor's first element, or (data == nullptr) a constant.
template <class T>
struct ElementInput {
  using Acc = acc_t<T>;
  const T* data = nullptr;
  Acc value{};
  __device__ __forceinline__ Acc at(int64_t offset) const {
    return data != nullptr ? convert<Acc>(data[offset]) : value;
  }
};

template <class T>
ElementInput<T> tensor_input(const Tensor& t) {
  return {static_cast<const T*>(t.raw_data()), acc_t<T>{}};
}
template <class T>
ElementInput<T> constant_input(double value) {
  return {nullptr, static_cast<acc_t<T>>(value)};
}

namespace detail {
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T, int V>
struct Loaded {
  acc_t<T> v[V];
};

template <int V, class T>
__device__ __forceinline__ Loaded<T, V> load_pack(const ElementInput<T>& in, int64_t pack) {
  Loaded<T, V> out;
  if (in.data != nullptr) {
    const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(in.data)[pack];
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = convert<acc_t<T>>(p.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = in.value;
  }
  return out;
}

template <int V, class Out, class F, class... L>
__device__ __forceinline__ void store_pack(Out* out, int64_t pack, const F& f, const L&... loaded) {
  Pack<Out, V> p;
#pragma unroll
  for (int j = 0; j < V; ++j) p.v[j] = convert<Out>(f(loaded.v[j]...));
  reinterpret_cast<Pack<Out, V>*>(out)[pack] = p;
}

template <int V, class Out, class F, class... T>
__global__ void elementwise_dense_kernel(int64_t n, Out* out, F f, ElementInput<T>... in) {
  const int64_t packs = n / V;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t p = first; p < packs; p += step) store_pack<V>(out, p, f, load_pack<V>(in, p)...);
  for (int64_t i = packs * V + first; i < n; i += step) out[i] = convert<Out>(f(in.at(i)...));
}

// V consecutive values of input `in` along a row, starting at `offset` (its element at the pack's first
// column), read as the indexer says: one value for a broadcast, a whole pack, or element by element.
template <int V, class T>
__device__ __forceinline__ Loaded<T, V> load_row_pack(const ElementInput<T>& in, RowRead read, int64_t offset,
                                                      int64_t stride) {
  Loaded<T, V> out;
  if (read == RowRead::broadcast) {
    const acc_t<T> v = in.at(offset);
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = v;
  } else if (read == RowRead::vector) {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(in.data + offset);
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = convert<acc_t<T>>(p.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = convert<acc_t<T>>(in.data[offset + j * stride]);
  }
  return out;
}

template <int V, class Index, class Out, class F, class... T, size_t... K>
__device__ __forceinline__ void row_pack(const RowIndexer<Index, sizeof...(T)>& ix, Index first, Out* out,
                                         const F& f, std::index_sequence<K...>,
                                         const ElementInput<T>&... in) {
  Index off[sizeof...(T)];
  ix.element_offsets(first, off);
  if constexpr (V == 1) {
    out[first] = convert<Out>(f(in.at(static_cast<int64_t>(off[K]))...));
  } else {
    store_pack<V>(out, static_cast<int64_t>(first / V), f,
                  load_row_pack<V>(in, ix.read[K], static_cast<int64_t>(off[K]),
                                   static_cast<int64_t>(ix.inner_stride[K]))...);
  }
}

// Broadcast or strided inputs, dense output: packs of V outputs inside one row (V > 1 needs rows that are
// a multiple of V); the index math (multiply-high divisions for 32-bit indices) runs once per pack.
template <int V, class Index, class Out, class F, class... T>
__global__ void elementwise_rows_kernel(RowIndexer<Index, sizeof...(T)> ix, Index packs, Out* out, F f,
                                        ElementInput<T>... in) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index p = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; p < packs; p += step) {
    row_pack<V>(ix, p * V, out, f, std::index_sequence_for<T...>{}, in...);
  }
}

template <class T>
bool aligned_to(const ElementInput<T>& in, size_t bytes) {
  return in.data == nullptr || reinterpret_cast<uintptr_t>(in.data) % bytes == 0;
}

// 32-bit index math is exact when the output index and every input offset stay below 2^31.
inline bool fits_32_bit(const ElementwisePlan& plan) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (plan.numel >= kLimit) return false;
  for (int k = 0; k < plan.inputs; ++k) {
    int64_t last = 0;
    for (int d = 0; d < plan.dims; ++d) last += (plan.sizes[d] - 1) * plan.strides[k][d];
    if (last >= kLimit) return false;
  }
  return true;
}

template <class... T>
constexpr size_t widest() {
  size_t w = 1;
  ((w = sizeof(T) > w ? sizeof(T) : w), ...);
  return w;
}

// The plan's strides re-slotted so that argument k reads row k (constants get zero strides).
template <class... T>
ElementwisePlan slot_strides(const ElementwisePlan& plan, const ElementInput<T>&... in) {
  ElementwisePlan slotted = plan;
  int next = 0;
  int k = 0;
  auto place = [&](bool is_tensor) {
    for (int d = 0; d < kElementwiseMaxDims; ++d) {
      slotted.strides[k][d] = is_tensor ? plan.strides[next][d] : 0;
    }
    next += is_tensor ? 1 : 0;
    ++k;
  };
  (place(in.data != nullptr), ...);
  return slotted;
}

// Launches the rows kernel over a slotted plan (dims >= 1): packs of 16 bytes of the widest type when the
// rows allow (32-bit indices only; 64-bit ones are rare enough for one element per thread).
template <class Index, class Out, class F, class... T>
void launch_rows(const ElementwisePlan& slotted, cudaStream_t stream, Out* out, const F& f,
                 const ElementInput<T>&... in) {
  constexpr int K = static_cast<int>(sizeof...(T));
  static_assert(K >= 1, "an elementwise kernel reads at least one input");
  constexpr int V = static_cast<int>(16 / widest<Out, T...>());
  const bool is_tensor[K] = {(in.data != nullptr)...};
  const int64_t inner = slotted.sizes[slotted.dims - 1];
  const bool packed = V > 1 && sizeof(Index) == 4 && inner % V == 0 &&
                      reinterpret_cast<uintptr_t>(out) % (sizeof(Out) * V) == 0;
  const int pack = packed ? V : 1;
  const bool aligned[K] = {aligned_to(in, sizeof(T) * static_cast<size_t>(pack))...};
  const RowIndexer<Index, K> ix = make_row_indexer<Index, K>(slotted, is_tensor, aligned, pack);
  const int64_t packs = slotted.numel / pack;
  if constexpr (V > 1 && sizeof(Index) == 4) {
    if (packed) {
      elementwise_rows_kernel<V, Index, Out, F, T...>
          <<<grid_for(packs), kBlock, 0, stream>>>(ix, static_cast<Index>(packs), out, f, in...);
      return;
    }
  }
  elementwise_rows_kernel<1, Index, Out, F, T...>
      <<<grid_for(packs), kBlock, 0, stream>>>(ix, static_cast<Index>(packs), out, f, in...);
}
}  // namespace detail

// Launches out[i] = f(in...) over the plan on `device`'s compute stream. Out is written densely.
template <class Out, class F, class... T>
void launch_elementwise(int device, const ElementwisePlan& plan, Out* out, const F& f,
                        const ElementInput<T>&... in) {
  static_assert(sizeof...(T) <= kElementwiseMaxInputs, "too many elementwise inputs");
  if (plan.numel == 0) return;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = plan.numel;
  if (plan.dense) {
    constexpr int V = static_cast<int>(16 / detail::widest<Out, T...>());
    const bool aligned = reinterpret_cast<uintptr_t>(out) % (sizeof(Out) * V) == 0 &&
                         (detail::aligned_to(in, sizeof(T) * V) && ...);
    if (V > 1 && aligned) {
      detail::elementwise_dense_kernel<V, Out, F, T...>
          <<<grid_for((n + V - 1) / V), kBlock, 0, stream>>>(n, out, f, in...);
    } else {
      detail::elementwise_dense_kernel<1, Out, F, T...><<<grid_for(n), kBlock, 0, stream>>>(n, out, f, in...);
    }
    LIFTOFF_LAUNCH_CHECK();
    return;
  }
  const ElementwisePlan slotted = detail::slot_strides(plan, in...);
  if (detail::fits_32_bit(plan)) {
    detail::launch_rows<uint32_t>(slotted, stream, out, f, in...);
  } else {
    detail::launch_rows<int64_t>(slotted, stream, out, f, in...);
  }
  LIFTOFF_LAUNCH_CHECK();
}

}  // namespace liftoff::cuda
