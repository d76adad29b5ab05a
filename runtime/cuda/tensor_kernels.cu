#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/capture.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"
#include "runtime/tensor_kernels.h"

namespace liftoff::kernels::cuda {

using liftoff::cuda::compute_stream;
using liftoff::cuda::convert;
using liftoff::cuda::DeviceGuard;
using liftoff::cuda::dispatch_device_all;
using liftoff::cuda::grid_for;
using liftoff::cuda::kBlock;

namespace {
constexpr int kMaxDims = 8;
struct StridedLayout {
  int dims;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};

StridedLayout layout_of(const Tensor& t) {
  LIFTOFF_CHECK(t.dim() <= kMaxDims, ShapeError, "CUDA copy supports up to ", kMaxDims,
                " dimensions, got shape ", shape_str(t.shape()));
  StridedLayout l{};
  l.dims = static_cast<int>(t.dim());
  for (int d = 0; d < l.dims; ++d) {
    l.shape[d] = t.shape()[d];
    l.strides[d] = t.strides()[d];
  }
  return l;
}

__device__ __forceinline__ int64_t strided_offset(const StridedLayout& l, int64_t linear) {
  int64_t off = 0;
  for (int d = l.dims - 1; d >= 0; --d) {
    off += (linear % l.shape[d]) * l.strides[d];
    linear /= l.shape[d];
  }
  return off;
}

// The general copy (64-bit indices, a division per dimension and element): tensors too large for the 32-bit
// kernel below.
template <class S, class D>
__global__ void copy_kernel(const S* src, StridedLayout src_layout, bool src_contiguous, D* dst,
                            StridedLayout dst_layout, bool dst_contiguous, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = src_contiguous ? i : strided_offset(src_layout, i);
    const int64_t d = dst_contiguous ? i : strided_offset(dst_layout, i);
    dst[d] = convert<D>(src[s]);
  }
}

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Elements per vector of a linear kernel over types S and D: 16-byte accesses of the narrower type, at
// most 8.
template <class S, class D>
constexpr int kLinearVec = static_cast<int>(16 / (sizeof(S) < sizeof(D) ? sizeof(S) : sizeof(D))) > 8
                               ? 8
                               : static_cast<int>(16 / (sizeof(S) < sizeof(D) ? sizeof(S) : sizeof(D)));

bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

unsigned linear_grid(int64_t work) {
  const int64_t blocks = (work + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535 * 16));
}

// dst[i] = D(src[i]) in vectors of V (the last n % V elements one by one): casts between dense tensors of one
// layout, at the memory bandwidth (one element per thread and step left a bf16 -> f32 cast at about half).
template <class S, class D, int V>
__global__ void cast_linear_kernel(const S* src, D* dst, int64_t n) {
  const int64_t vectors = n / V;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = first; v < vectors; v += step) {
    const Pack<S, V> in = reinterpret_cast<const Pack<S, V>*>(src)[v];
    Pack<D, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = convert<D>(in.v[k]);
    reinterpret_cast<Pack<D, V>*>(dst)[v] = out;
  }
  for (int64_t i = vectors * V + first; i < n; i += step) dst[i] = convert<D>(src[i]);
}

// Division by a divisor fixed at launch with a multiply and a shift (Granlund and Montgomery): exact for
// dividends below 2^31.
struct FastDivmod {
  uint32_t divisor = 1, magic = 0, shift = 0;
  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

// A copy's dimensions after dropping size-1 ones and merging those both tensors walk contiguously, innermost
// first, with 32-bit strides (every offset below 2^31).
struct CompactLayout {
  int dims = 0;
  FastDivmod size[kMaxDims];
  uint32_t src_stride[kMaxDims], dst_stride[kMaxDims];
};

// Offsets of logical element i (in src/dst) and its innermost coordinate.
__device__ __forceinline__ void locate(const CompactLayout& l, uint32_t i, uint32_t* inner, uint32_t* so,
                                       uint32_t* dof) {
  uint32_t s = 0, d = 0;
#pragma unroll
  for (int k = 0; k < kMaxDims; ++k) {
    if (k == l.dims) break;
    const uint32_t q = l.size[k].div(i);
    const uint32_t c = i - q * l.size[k].divisor;
    if (k == 0) *inner = c;
    s += c * l.src_stride[k];
    d += c * l.dst_stride[k];
    i = q;
  }
  *so = s;
  *dof = d;
}

// Strided copy (a permute's contiguous(), a cast into a strided view): kPerThread consecutive elements per
// thread, the offsets computed once with multiply-shift divisions and then stepped along the innermost
// dimension (about 5x fewer instructions per element than the 64-bit general kernel).
constexpr int kPerThread = 4;
template <class S, class D>
__global__ void strided_copy_kernel(const S* src, D* dst, CompactLayout l, uint32_t n) {
  const uint32_t inner_size = l.size[0].divisor;
  const uint32_t step = gridDim.x * blockDim.x * kPerThread;
  for (uint32_t base = (blockIdx.x * blockDim.x + threadIdx.x) * kPerThread; base < n; base += step) {
    uint32_t inner, so, dof;
    locate(l, base, &inner, &so, &dof);
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) {
      if (base + e >= n) break;
      dst[dof] = convert<D>(src[so]);
      if (++inner == inner_size) {
        locate(l, base + e + 1, &inner, &so, &dof);
      } else {
        so += l.src_stride[0];
        dof += l.dst_stride[0];
      }
    }
  }
}

// A permute that swaps the two innermost dimensions (NCHW <-> NHWC activations, KCRS <-> KRSC conv weights),
// with an optional cast: compacted, dst walks b (dst stride 1, size B) inside a (src stride 1, size A) inside
// a batch dimension. The element-wise kernel above reads or writes such copies with a stride (8x the bytes
// for f32 weights, about a fifth of the bandwidth); here a block stages a TA x TB tile in shared memory,
// reading it along a and writing it along b, both coalesced. TB is b itself up to 128 (a 3x3 filter's 9
// taps fill the tile: rounded up to 16 they left 7 of every 16 threads idle and cut the written rows into
// 36-byte pieces), else 128; a tile holds at most transpose_tile_elems.
struct TransposeTiles {
  uint32_t a = 1, b = 1, batch = 1;   // sizes
  uint32_t src_b = 0, src_batch = 0;  // src strides (a's is 1)
  uint32_t dst_a = 0, dst_batch = 0;  // dst strides (b's is 1)
  uint32_t tile_a = 1, tile_b = 1, a_tiles = 1;
  FastDivmod by_tile_a, by_tile_b;
};
constexpr int kTransposeIters = 16;  // elements per thread and phase: kTileElems / kBlock

template <class S>
constexpr uint32_t transpose_tile_elems() {
  return sizeof(S) <= 4 ? 4096u : 2048u;  // 48 KB of shared memory at most, with the padding column
}

template <class S, class D>
__global__ void transpose_copy_kernel(const S* src, D* dst, TransposeTiles t) {
  extern __shared__ __align__(16) unsigned char tile_bytes[];
  S* tile = reinterpret_cast<S*>(tile_bytes);
  const uint32_t tile_b = t.tile_b;
  const uint32_t pitch = tile_b | 1u;  // odd: the column walk of the load phase hits every bank once
  const uint32_t a0 = (blockIdx.x % t.a_tiles) * t.tile_a, b0 = (blockIdx.x / t.a_tiles) * tile_b;
  const uint32_t elems = t.tile_a * tile_b;
  const S* from = src + static_cast<uint64_t>(blockIdx.y) * t.src_batch;
  D* to = dst + static_cast<uint64_t>(blockIdx.y) * t.dst_batch;
  S v[kTransposeIters];
#pragma unroll
  for (int u = 0; u < kTransposeIters; ++u) {  // all loads first: kTransposeIters in flight per thread
    const uint32_t i = threadIdx.x + u * blockDim.x;
    const uint32_t bb = t.by_tile_a.div(i), aa = i - bb * t.tile_a;
    if (i < elems && a0 + aa < t.a && b0 + bb < t.b) v[u] = from[(b0 + bb) * t.src_b + a0 + aa];
  }
#pragma unroll
  for (int u = 0; u < kTransposeIters; ++u) {
    const uint32_t i = threadIdx.x + u * blockDim.x;
    const uint32_t bb = t.by_tile_a.div(i), aa = i - bb * t.tile_a;
    if (i < elems) tile[aa * pitch + bb] = v[u];
  }
  __syncthreads();
#pragma unroll 4
  for (uint32_t j = threadIdx.x; j < elems; j += blockDim.x) {
    const uint32_t aa = t.by_tile_b.div(j), bb = j - aa * tile_b;
    if (a0 + aa < t.a && b0 + bb < t.b) to[(a0 + aa) * t.dst_a + b0 + bb] = convert<D>(tile[aa * pitch + bb]);
  }
}

// The tiles of a compacted copy that is such a transpose; false for any other copy.
template <class S>
bool transpose_tiles(const CompactLayout& l, TransposeTiles* t) {
  if (l.dims < 2 || l.dims > 3) return false;
  // The compaction orders dimensions by the source's walk or the destination's: b may come first or second.
  int b_dim = 0;
  if (l.dst_stride[0] == 1 && l.src_stride[1] == 1) {
    b_dim = 0;
  } else if (l.src_stride[0] == 1 && l.dst_stride[1] == 1) {
    b_dim = 1;
  } else {
    return false;
  }
  const int a_dim = 1 - b_dim;
  t->b = l.size[b_dim].divisor;
  t->a = l.size[a_dim].divisor;
  t->src_b = l.src_stride[b_dim];
  t->dst_a = l.dst_stride[a_dim];
  t->batch = l.dims == 3 ? l.size[2].divisor : 1;
  t->src_batch = l.dims == 3 ? l.src_stride[2] : 0;
  t->dst_batch = l.dims == 3 ? l.dst_stride[2] : 0;
  if (t->batch > 65535) return false;
  const uint32_t max_elems = transpose_tile_elems<S>();
  t->tile_b = std::min(t->b, 128u);
  const uint32_t tile_b = t->tile_b;
  // (tile_b | 1) columns of shared memory: the odd pitch.
  t->tile_a = std::min(t->a, max_elems / (tile_b | 1u));
  t->by_tile_a = FastDivmod(t->tile_a);
  t->by_tile_b = FastDivmod(tile_b);
  t->a_tiles = (t->a + t->tile_a - 1) / t->tile_a;
  const uint64_t tiles = uint64_t{t->a_tiles} * ((t->b + tile_b - 1) / tile_b);
  return tiles < (uint64_t{1} << 31);
}

template <class S, class D>
void launch_transpose_copy(const S* src, D* dst, const TransposeTiles& t, cudaStream_t stream) {
  const uint32_t tile_b = t.tile_b;
  const dim3 grid(t.a_tiles * ((t.b + tile_b - 1) / tile_b), t.batch);
  const size_t shared = size_t{t.tile_a} * (tile_b | 1u) * sizeof(S);
  static_assert(kTransposeIters * kBlock >= static_cast<int>(transpose_tile_elems<float>()),
                "a tile's elements must fit the threads' registers");
  transpose_copy_kernel<S, D><<<grid, kBlock, shared, stream>>>(src, dst, t);
}

// src's and dst's common shape compacted (see CompactLayout); false when a size or an offset needs 64 bits.
bool compact_layout(const Tensor& src, const Tensor& dst, CompactLayout* out) {
  int64_t size[kMaxDims], ss[kMaxDims], ds[kMaxDims];
  int dims = 0;
  for (int64_t d = src.dim() - 1; d >= 0; --d) {  // innermost first
    const int64_t n = src.shape()[static_cast<size_t>(d)];
    if (n == 1) continue;
    const int64_t s = src.strides()[static_cast<size_t>(d)], t = dst.strides()[static_cast<size_t>(d)];
    if (dims > 0 && s == ss[dims - 1] * size[dims - 1] && t == ds[dims - 1] * size[dims - 1]) {
      size[dims - 1] *= n;  // walks on from the dimension inside it in both tensors
      continue;
    }
    if (dims == kMaxDims) return false;
    size[dims] = n;
    ss[dims] = s;
    ds[dims] = t;
    ++dims;
  }
  if (dims == 0) {  // one element
    size[0] = 1;
    ss[0] = ds[0] = 0;
    dims = 1;
  }
  constexpr int64_t kLimit = int64_t{1} << 31;
  int64_t src_extent = 0, dst_extent = 0, total = 1;
  for (int k = 0; k < dims; ++k) {
    if (ss[k] < 0 || ds[k] < 0) return false;
    src_extent += (size[k] - 1) * ss[k];
    dst_extent += (size[k] - 1) * ds[k];
    total *= size[k];
  }
  if (total >= kLimit || src_extent >= kLimit || dst_extent >= kLimit) return false;
  out->dims = dims;
  for (int k = 0; k < dims; ++k) {
    out->size[k] = FastDivmod(static_cast<uint32_t>(size[k]));
    out->src_stride[k] = static_cast<uint32_t>(ss[k]);
    out->dst_stride[k] = static_cast<uint32_t>(ds[k]);
  }
  return true;
}

template <class T>
__global__ void fill_kernel(T* dst, StridedLayout layout, bool contiguous, T value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[contiguous ? i : strided_offset(layout, i)] = value;
  }
}

// dst += src over dense, equally laid out tensors, in vectors of V (V = 1: any alignment).
template <class T, int V>
__global__ void accumulate_kernel(T* dst, const T* src, int64_t n) {
  const auto add = [](T a, T b) {
    // 16-bit floats add in f32; everything else (f32, f64 and integer counters) adds exactly in its own type.
    if constexpr (liftoff::cuda::IsHalfType<T>::value) {
      return convert<T>(convert<float>(a) + convert<float>(b));
    } else {
      return static_cast<T>(a + b);
    }
  };
  const int64_t vectors = n / V;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = first; v < vectors; v += step) {
    Pack<T, V> a = reinterpret_cast<Pack<T, V>*>(dst)[v];
    const Pack<T, V> b = reinterpret_cast<const Pack<T, V>*>(src)[v];
#pragma unroll
    for (int k = 0; k < V; ++k) a.v[k] = add(a.v[k], b.v[k]);
    reinterpret_cast<Pack<T, V>*>(dst)[v] = a;
  }
  for (int64_t i = vectors * V + first; i < n; i += step) dst[i] = add(dst[i], src[i]);
}

// Whether element i of a's storage span is element i of b's: both contiguous, or both channels-last.
bool same_dense_layout(const Tensor& a, const Tensor& b) {
  return (a.is_contiguous() && b.is_contiguous()) || (a.is_channels_last() && b.is_channels_last());
}

// Same-device copy with cast and strides, on the device's compute stream.
void device_copy(const Tensor& src, const Tensor& dst) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = src.numel();
  if (n == 0) return;
  // Both dense in the same layout (contiguous, or both channels-last): element i of one storage is element i
  // of the other, so the copy is linear.
  const bool linear = same_dense_layout(src, dst);
  if (src.dtype() == dst.dtype() && linear) {
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  CompactLayout compact;
  const bool fits32 = !linear && compact_layout(src, dst, &compact);
  dispatch_device_all(src.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_device_all(dst.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const auto* sp = static_cast<const S*>(src.raw_data());
      auto* dp = static_cast<D*>(dst.raw_data());
      if (linear) {
        constexpr int V = kLinearVec<S, D>;
        if (aligned_to(sp, V * sizeof(S)) && aligned_to(dp, V * sizeof(D))) {
          cast_linear_kernel<S, D, V><<<linear_grid(n / V + 1), kBlock, 0, stream>>>(sp, dp, n);
        } else {
          cast_linear_kernel<S, D, 1><<<linear_grid(n), kBlock, 0, stream>>>(sp, dp, n);
        }
      } else if (TransposeTiles tiles; fits32 && transpose_tiles<S>(compact, &tiles)) {
        launch_transpose_copy(sp, dp, tiles, stream);
      } else if (fits32) {
        strided_copy_kernel<S, D><<<linear_grid((n + kPerThread - 1) / kPerThread), kBlock, 0, stream>>>(
            sp, dp, compact, static_cast<uint32_t>(n));
      } else {
        copy_kernel<S, D><<<grid_for(n), kBlock, 0, stream>>>(sp, layout_of(src), src.is_contiguous(), dp,
                                                              layout_of(dst), dst.is_contiguous(), n);
      }
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}
}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  const Device sd = src.device();
  const Device dd = dst.device();
  if (sd.is_cuda() && dd.is_cuda() && sd == dd) return device_copy(src, dst);
  check_not_capturing("A copy between host and device (e.g. item(), to(cpu), a host tensor as op input)");
  if (sd.is_cpu()) {
    // Host -> device: pack on the host in the source dtype, upload, then cast/scatter on the device.
    const Tensor packed = src.contiguous();
    const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
    Tensor staging = direct ? dst : Tensor::empty(src.shape(), src.dtype(), dd);
    DeviceGuard guard(dd.index);
    cudaStream_t stream = compute_stream(dd.index);
    LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(staging.raw_data(), packed.raw_data(), packed.nbytes(),
                                       cudaMemcpyHostToDevice, stream));
    // The host buffer may be pageable and freed by the caller right after we return.
    LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!direct) device_copy(staging, dst);
    return;
  }
  if (dd.is_cpu()) {
    // Device -> host: pack on the device in the source dtype, download, then cast on the host.
    Tensor packed = src.is_contiguous() ? src : src.clone();
    const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
    Tensor host = direct ? dst : Tensor::empty(src.shape(), src.dtype(), Device::cpu());
    DeviceGuard guard(sd.index);
    cudaStream_t stream = compute_stream(sd.index);
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(host.raw_data(), packed.raw_data(), packed.nbytes(), cudaMemcpyDeviceToHost, stream));
    LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!direct) liftoff::kernels::cpu::copy(host, dst);
    return;
  }
  // Device -> other device: pack on the source, peer copy, then cast on the destination.
  Tensor packed = src.is_contiguous() ? src : src.clone();
  Tensor staging = Tensor::empty(src.shape(), src.dtype(), dd);
  liftoff::cuda::synchronize(sd.index);
  {
    DeviceGuard guard(dd.index);
    LIFTOFF_CUDA_CHECK(cudaMemcpyPeerAsync(staging.raw_data(), dd.index, packed.raw_data(), sd.index,
                                           packed.nbytes(), compute_stream(dd.index)));
  }
  device_copy(staging, dst);
}

void fill(const Tensor& dst, double value) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const int64_t n = dst.numel();
  if (n == 0) return;
  // Zeros of a dense tensor (gradient buffers, accumulators): a memset, which runs at the copy engine's speed
  // and is a graph node like a kernel. +0.0 is all zero bits in every dtype.
  if (value == 0.0 && !std::signbit(value) && (dst.is_contiguous() || dst.is_channels_last())) {
    LIFTOFF_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), compute_stream(device)));
    return;
  }
  dispatch_device_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(dst.raw_data()), layout_of(dst), dst.is_contiguous(), convert<T>(value), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void accumulate(const Tensor& dst, const Tensor& src) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_device_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = static_cast<int>(16 / sizeof(T)) > 8 ? 8 : static_cast<int>(16 / sizeof(T));
    auto* dp = static_cast<T*>(dst.raw_data());
    const auto* sp = static_cast<const T*>(src.raw_data());
    if (aligned_to(dp, V * sizeof(T)) && aligned_to(sp, V * sizeof(T))) {
      accumulate_kernel<T, V><<<linear_grid(n / V + 1), kBlock, 0, compute_stream(device)>>>(dp, sp, n);
    } else {
      accumulate_kernel<T, 1><<<linear_grid(n), kBlock, 0, compute_stream(device)>>>(dp, sp, n);
    }
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::kernels::cuda
