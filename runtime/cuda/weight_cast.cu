#include "runtime/cuda/weight_cast.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/block_table.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

constexpr int kThreads = 256;
// Elements per block: a chunk of a linear copy, or whole K-rows of a channels-last copy staged in shared
// memory (32 KB of f32).
constexpr uint32_t kChunk = 8192;
static_assert(kChunk == kWeightCastMaxRow, "a block stages at least one K-row");
constexpr uint32_t kVec = 8;  // elements per vector of the linear path: two float4 loads, one 16-byte store
constexpr int kVecsPerThread = static_cast<int>(kChunk / kVec / kThreads);  // all loads in flight first
static_assert(kVecsPerThread * kVec * kThreads == kChunk, "a chunk is whole vectors of every thread");
constexpr int kMaxTensors = 112;

// One launch's work, passed by value as the kernel parameter: tensor t owns the blocks
// [first_block[t], first_block[t + 1]) (no empty tensors, so the bounds increase strictly).
struct CastTable {
  const float* src[kMaxTensors];
  void* dst[kMaxTensors];
  uint32_t numel[kMaxTensors];
  uint32_t channels[kMaxTensors];  // C of a channels-last [K, C, R, S] copy; 0: a linear copy
  uint32_t taps[kMaxTensors];      // R*S of a channels-last copy
  uint32_t first_block[kMaxTensors + 1];
  int tensors;
};
static_assert(sizeof(CastTable) < 4000, "kernel parameters must stay under 4 KB");

template <class D>
struct alignas(16) HalfPack {
  D v[kVec];
};

// dst[i] = D(src[i]) for i in [begin, end), a span of at most kChunk elements starting at a multiple of
// kChunk: 16-byte vectors where both pointers allow, every load of a thread issued before its stores.
template <class D>
__device__ void cast_chunk_linear(const float* __restrict__ src, D* __restrict__ dst, uint32_t begin,
                                  uint32_t end) {
  uint32_t done = begin;
  if ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0) {
    const uint32_t packs = (end - begin) / kVec;
    const auto* in = reinterpret_cast<const float4*>(src + begin);
    auto* out = reinterpret_cast<HalfPack<D>*>(dst + begin);
    float4 loaded[2 * kVecsPerThread];
#pragma unroll
    for (int u = 0; u < kVecsPerThread; ++u) {
      const uint32_t p = threadIdx.x + u * kThreads;
      if (p < packs) {
        loaded[2 * u] = in[2 * p];
        loaded[2 * u + 1] = in[2 * p + 1];
      }
    }
#pragma unroll
    for (int u = 0; u < kVecsPerThread; ++u) {
      const uint32_t p = threadIdx.x + u * kThreads;
      if (p < packs) {
        const float4 a = loaded[2 * u], b = loaded[2 * u + 1];
        const float f[kVec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        HalfPack<D> h;
#pragma unroll
        for (uint32_t k = 0; k < kVec; ++k) h.v[k] = convert<D>(f[k]);
        out[p] = h;
      }
    }
    done += packs * kVec;
  }
  for (uint32_t i = done + threadIdx.x; i < end; i += kThreads) dst[i] = convert<D>(src[i]);
}

// The `unit`-th group of K-rows of a [K, C, R, S] master into its channels-last (KRSC) copy: each row's
// [C][R*S] becomes [R*S][C]. The group is read into shared memory in the master's order and written out in
// the copy's, both coalesced; the shared reads walk c at a stride of R*S words (odd for odd kernels: no bank
// conflicts).
template <class D>
__device__ void cast_rows_channels_last(const float* __restrict__ src, D* __restrict__ dst, uint32_t channels,
                                        uint32_t taps, uint32_t numel, uint32_t unit, float* tile) {
  const uint32_t row = channels * taps;
  const uint32_t group = kChunk / row * row;
  const uint32_t begin = unit * group;
  const uint32_t n = numel - begin < group ? numel - begin : group;
#pragma unroll 4
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) tile[i] = src[begin + i];
  __syncthreads();
#pragma unroll 4
  for (uint32_t j = threadIdx.x; j < n; j += kThreads) {
    const uint32_t r = j / row, in_row = j - r * row;
    const uint32_t t = in_row / channels, c = in_row - t * channels;
    dst[begin + j] = convert<D>(tile[r * row + c * taps + t]);
  }
}

template <class D>
__global__ void __launch_bounds__(kThreads) weight_cast_kernel(const CastTable table) {
  __shared__ float tile[kChunk];
  const int lo = tensor_of_block(table);
  const uint32_t unit = blockIdx.x - table.first_block[lo];
  const float* src = table.src[lo];
  D* dst = static_cast<D*>(table.dst[lo]);
  const uint32_t numel = table.numel[lo];
  if (table.channels[lo] == 0) {
    const uint32_t begin = unit * kChunk;
    cast_chunk_linear(src, dst, begin, numel - begin < kChunk ? numel : begin + kChunk);
  } else {
    cast_rows_channels_last(src, dst, table.channels[lo], table.taps[lo], numel, unit, tile);
  }
}

uint32_t blocks_for(uint32_t numel, uint32_t channels, uint32_t taps) {
  if (channels == 0) return (numel + kChunk - 1) / kChunk;
  const uint32_t row = channels * taps;
  const uint32_t rows = numel / row, rows_per_block = kChunk / row;
  return (rows + rows_per_block - 1) / rows_per_block;
}

void launch(const CastTable& table, uint32_t blocks, DType dtype, cudaStream_t stream) {
  if (dtype == DType::bf16) {
    weight_cast_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(table);
  } else {
    weight_cast_kernel<__half><<<blocks, kThreads, 0, stream>>>(table);
  }
  LIFTOFF_LAUNCH_CHECK();
}

}  // namespace

bool weight_cast_supported(const Tensor& master, const Tensor& half) {
  if (!master.defined() || !half.defined()) return false;
  if (master.dtype() != DType::f32 || !master.is_contiguous()) return false;
  if (half.dtype() != DType::f16 && half.dtype() != DType::bf16) return false;
  if (!half.is_cuda() || master.device() != half.device() || master.shape() != half.shape()) return false;
  if (half.numel() >= (int64_t{1} << 31)) return false;
  if (half.is_contiguous()) return true;  // also a channels-last copy with C == 1 or R*S == 1: same bytes
  if (!half.is_channels_last()) return false;
  const Shape& s = half.shape();
  return s[1] * s[2] * s[3] <= kWeightCastMaxRow;
}

void cast_weights(const std::vector<Tensor>& masters, const std::vector<Tensor>& halves) {
  LIFTOFF_CHECK(masters.size() == halves.size(), ValueError, "cast_weights: ", masters.size(),
                " masters but ", halves.size(), " half copies");
  if (halves.empty()) return;
  const Device device = halves.front().device();
  const DType dtype = halves.front().dtype();
  for (size_t i = 0; i < halves.size(); ++i) {
    LIFTOFF_CHECK(weight_cast_supported(masters[i], halves[i]) && halves[i].device() == device &&
                      halves[i].dtype() == dtype,
                  ValueError, "cast_weights: pair ", i, " (", shape_str(halves[i].shape()),
                  ") is not an f32 master and a half copy on ", device.str(), " in ", dtype_name(dtype));
  }
  DeviceGuard guard(device.index);
  cudaStream_t stream = compute_stream(device.index);
  CastTable table{};
  uint32_t blocks = 0;
  for (size_t i = 0; i < halves.size(); ++i) {
    const Tensor& half = halves[i];
    if (half.numel() == 0) continue;
    const int t = table.tensors++;
    table.src[t] = static_cast<const float*>(masters[i].raw_data());
    table.dst[t] = half.raw_data();
    table.numel[t] = static_cast<uint32_t>(half.numel());
    const bool transposed = !half.is_contiguous();  // channels-last with C > 1 and R*S > 1
    table.channels[t] = transposed ? static_cast<uint32_t>(half.shape()[1]) : 0;
    table.taps[t] = transposed ? static_cast<uint32_t>(half.shape()[2] * half.shape()[3]) : 1;
    blocks += blocks_for(table.numel[t], table.channels[t], table.taps[t]);
    table.first_block[t + 1] = blocks;
    if (table.tensors == kMaxTensors) {
      launch(table, blocks, dtype, stream);
      table = CastTable{};
      blocks = 0;
    }
  }
  if (table.tensors > 0) launch(table, blocks, dtype, stream);
}

}  // namespace liftoff::cuda
