// Channels-last (NHWC) batch-norm kernels for any channel count. x is [rows = N * H * W][C] in memory: a
// channel is a column. The reductions run on a 2-D grid: blockIdx.x picks a tile of lanes * VEC channels
// (lanes threads, VEC consecutive channels each, 16-byte loads when VEC > 1), blockIdx.y a set of row groups;
// the grid's row groups sweep the tensor together (sweep_rows), so a warp reads whole rows (or 512-byte
// spans of wide rows). Per block the groups' sums are added in a fixed tree order, one partial per (channel,
// split); the tile's last block to finish merges the splits in a fixed order and finalizes: deterministic, no
// float atomics, one launch, and no cap on C (the tiles keep the register and shared-memory use of a block
// fixed). Internal to ops/batch_norm2d: cuda.cu is the only includer.
#pragma once
#include <cstdint>

#include "ops/batch_norm2d/cuda_kernels.cuh"

namespace liftoff::cuda {
namespace {  // NOLINT: included by one translation unit

template <class T>
constexpr int kNhwcVec = static_cast<int>(16 / sizeof(T));
// Partials the last block's threads load before adding any (independent loads in flight: the merge of a few
// hundred splits was a chain of dependent L2 round trips, 66-166 us per launch on ResNet-50's early layers).
constexpr int kMergeInFlight = 16;
// Rows each thread of the statistics loads before adding any: one 16-byte load per row in flight was a chain
// of DRAM round trips (ResNet-18's 32 px layers ran at about a tenth of the bandwidth, 20 us per launch).
// Four rows took MobileNetV2's small layers two round trips (about 10 us a launch; a normalize takes 4).
template <class T>
constexpr int kRowsInFlight = sizeof(T) <= 4 ? 8 : 4;
// The gradient reads two or three tensors per row: fewer rows keep as many loads in flight in 128 registers
// (3 or 4 rows made its launches slower, not faster: session 17, calls 2-3).
constexpr int kGradRowsInFlight = 2;
// The statistics' splits per merging thread stop at kMaxMergeRounds * kMergeInFlight (nhwc_grid; a remainder
// below kMergeInFlight loads one by one): a tile of 256 channels has one merging thread per channel, and
// MobileNetV2's 144-channel layers took 19 us a launch with 264 splits, 13.5 us with 96.
constexpr int kMaxMergeRounds = 6;

// VEC elements as loaded (16 bytes for the vector kernels): kept packed until they are added, so the rows in
// flight cost 4 registers each rather than VEC.
template <class T, int VEC>
struct alignas(VEC * sizeof(T) == 16 ? 16 : alignof(T)) Packet {
  T v[VEC];
};
template <class T, int VEC>
__device__ __forceinline__ Packet<T, VEC> load_packet(const T* p) {
  return *reinterpret_cast<const Packet<T, VEC>*>(p);
}

// The rows of one row group in a sweep of the whole tensor: the grid's `stride` groups move through it as
// one band (group g takes rows g, g + stride, ...), every group on the same band at a time, so a warp's
// groups read neighbouring rows. backward walks from the last band to row 0: a pass that reads the tensor
// right after (normalize after statistics, input gradient after the gradient sums) starts at row 0, on the
// rows this sweep read last, the likeliest to be in L2 still (ResNet-18's step +0.9-1.5%, ResNet-50's
// +1.3-3.4%: docs/perf.md, session 33). IN_FLIGHT rows are loaded before any is used; load(row) -> value,
// use(value).
template <int IN_FLIGHT, class Load, class Use>
__device__ __forceinline__ void sweep_rows(int64_t rows, int64_t group, int64_t stride, bool backward,
                                           const Load& load, const Use& use) {
  const int64_t full_bands = rows / stride;
  const int64_t tail_row = full_bands * stride + group;  // the last, partial band
  const bool has_tail = tail_row < rows;
  if (backward && has_tail) use(load(tail_row));
  // One running row and a signed step (not a band index times the stride per load): the reductions are at
  // their 128-register bound.
  const int64_t step = backward ? -stride : stride;
  int64_t row = backward ? tail_row - stride : group;
  int64_t b = 0;
  for (; b + IN_FLIGHT <= full_bands; b += IN_FLIGHT, row += IN_FLIGHT * step) {
    decltype(load(row)) v[IN_FLIGHT];
#pragma unroll
    for (int u = 0; u < IN_FLIGHT; ++u) v[u] = load(row + u * step);
#pragma unroll
    for (int u = 0; u < IN_FLIGHT; ++u) use(v[u]);
  }
  for (; b < full_bands; ++b, row += step) use(load(row));
  if (!backward && has_tail) use(load(tail_row));
}

// One (a, b) partial pair from L2 in one load (the other blocks' fenced writes are there).
__device__ __forceinline__ void load_pair_cg(const float* q, float& a, float& b) {
  const float2 v = __ldcg(reinterpret_cast<const float2*>(q));
  a = v.x;
  b = v.y;
}
__device__ __forceinline__ void load_pair_cg(const double* q, double& a, double& b) {
  const double2 v = __ldcg(reinterpret_cast<const double2*>(q));
  a = v.x;
  b = v.y;
}

template <class T, class A, int VEC>
__device__ __forceinline__ void load_vec(const T* p, A (&out)[VEC]) {
  if constexpr (VEC * sizeof(T) == 16) {
    const uint4 packed = *reinterpret_cast<const uint4*>(p);
    const T* v = reinterpret_cast<const T*>(&packed);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = convert<A>(v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = convert<A>(p[j]);
  }
}

template <class T, class A, int VEC>
__device__ __forceinline__ void store_vec(T* p, const A (&v)[VEC]) {
  if constexpr (VEC * sizeof(T) == 16) {
    uint4 packed;
    T* out = reinterpret_cast<T*>(&packed);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = convert<T>(v[j]);
    *reinterpret_cast<uint4*>(p) = packed;
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) p[j] = convert<T>(v[j]);
  }
}

// Adds the per-thread values a[t * VEC + j] (and b) over the row groups of the block into group 0's threads;
// the pairing is fixed, so the result is deterministic. groups is a power of two.
template <class A, int VEC>
__device__ __forceinline__ void tree_add_rows(A* a, A* b, int lanes, int groups) {
  const int t = threadIdx.x;
  const int group = t / lanes;
  for (int half = groups / 2; half > 0; half /= 2) {
    __syncthreads();
    if (group < half) {
      const int other = (t + half * lanes) * VEC;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        a[t * VEC + j] += a[other + j];
        b[t * VEC + j] += b[other + j];
      }
    }
  }
  __syncthreads();
}

// The last block of this grid column (tile) to finish gets true and resets the column's counter.
__device__ __forceinline__ bool last_block_of_column(unsigned* done) {
  __shared__ bool last;
  __syncthreads();  // every thread's partial writes (each followed by its __threadfence) are done
  if (threadIdx.x == 0) {
    const unsigned finished = atomicAdd(done, 1u) + 1u;
    last = finished == gridDim.y;
    if (last) {
      *done = 0u;
      __threadfence();
    }
  }
  __syncthreads();
  return last;
}

// The block's per-thread sums (a, b of VEC channels each) -> one partial per (channel, split); the tile's
// last block then adds each channel's splits (group g of the tile's channels takes splits g, g + groups, ...,
// then the groups are added in tree order) and calls finish(a, b, c, inputs), inputs = finish.load_inputs(c)
// loaded before the merge. s_a, s_b: kReduceBlock * VEC scratch.
template <class A, int VEC, class Finish>
__device__ void reduce_tile(const A (&a)[VEC], const A (&b)[VEC], A* s_a, A* s_b, int lanes, int64_t channels,
                            A* partial, unsigned* done, const Finish& finish) {
  const int t = threadIdx.x;
  const int groups = kReduceBlock / lanes;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    s_a[t * VEC + j] = a[j];
    s_b[t * VEC + j] = b[j];
  }
  tree_add_rows<A, VEC>(s_a, s_b, lanes, groups);
  const int64_t tile_first = static_cast<int64_t>(blockIdx.x) * lanes * VEC;
  const int64_t splits = gridDim.y;
  if (t < lanes) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int64_t c = tile_first + t * VEC + j;
      if (c < channels) {
        A* out = partial + (blockIdx.y * channels + c) * 2;  // [split][channel]: the merge reads rows
        out[0] = s_a[t * VEC + j];
        out[1] = s_b[t * VEC + j];
      }
    }
    __threadfence();
  }
  if (!last_block_of_column(done + blockIdx.x)) return;
  const int tile_channels = lanes * VEC;  // a power of two <= kReduceBlock
  const int merge_groups = kReduceBlock / tile_channels;
  const int k = t % tile_channels, g = t / tile_channels;
  const int64_t c = tile_first + k;
  // What finish reads besides the sums, loaded now so its round trip overlaps the merge's.
  typename Finish::Inputs inputs{};
  if (g == 0 && c < channels) inputs = finish.load_inputs(c);
  A sum_a = 0, sum_b = 0;
  if (c < channels) {
    // Splits g, g + merge_groups, ... in kMergeInFlight interleaved sums, added in a fixed order at the end.
    // __ldcg reads L2, where the other blocks' fenced partials are (as the volatile loads did).
    const A* p = partial + c * 2;
    const int64_t row_stride = channels * 2;
    A pa[kMergeInFlight] = {}, pb[kMergeInFlight] = {};
    int64_t s = g;
    for (; s + (kMergeInFlight - 1) * merge_groups < splits; s += kMergeInFlight * merge_groups) {
      A va[kMergeInFlight], vb[kMergeInFlight];
#pragma unroll
      for (int u = 0; u < kMergeInFlight; ++u)
        load_pair_cg(p + (s + u * merge_groups) * row_stride, va[u], vb[u]);
#pragma unroll
      for (int u = 0; u < kMergeInFlight; ++u) {
        pa[u] += va[u];
        pb[u] += vb[u];
      }
    }
    for (; s < splits; s += merge_groups) {
      A va, vb;
      load_pair_cg(p + s * row_stride, va, vb);
      pa[0] += va;
      pb[0] += vb;
    }
#pragma unroll
    for (int u = 0; u < kMergeInFlight; ++u) {
      sum_a += pa[u];
      sum_b += pb[u];
    }
  }
  s_a[t] = sum_a;  // the tree above ended with a barrier: the scratch is free
  s_b[t] = sum_b;
  for (int half = merge_groups / 2; half > 0; half /= 2) {
    __syncthreads();
    if (g < half) {
      s_a[t] += s_a[t + half * tile_channels];
      s_b[t] += s_b[t + half * tile_channels];
    }
  }
  __syncthreads();
  if (g == 0 && c < channels) finish(s_a[t], s_b[t], c, inputs);
}

// Statistics: sums of (x - shift) and its square, shift = the channel's value in row 0 (keeps the
// cancellation of the sum of squares small), then mean and M2 for StatsFinalize.
template <class T, class A, class W>
struct StatsTileFinish {
  const T* x;
  StatsFinalize<A, W> finalize;
  struct Inputs {
    A shift = 0;
    typename StatsFinalize<A, W>::Running running;
  };
  __device__ Inputs load_inputs(int64_t c) const { return {convert<A>(x[c]), finalize.load_running(c)}; }
  __device__ void operator()(A sum, A sum_sq, int64_t c, const Inputs& in) const {
    const A mean_shifted = sum / finalize.count;
    const A m2 = max(A(0), sum_sq - sum * mean_shifted);
    finalize.finish(in.shift + mean_shifted, m2, c, in.running);
  }
};

template <class T, class A, class W, int VEC>
__global__ void __launch_bounds__(kReduceBlock, 2)
    stats_nhwc_kernel(const T* x, int64_t channels, int64_t rows, bool backward, int lanes, A* partial,
                      unsigned* done, StatsFinalize<A, W> finalize) {
  __shared__ A s_a[kReduceBlock * VEC], s_b[kReduceBlock * VEC];
  const int groups = kReduceBlock / lanes;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * lanes + threadIdx.x % lanes) * VEC;
  A sum[VEC], sum_sq[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) sum[j] = sum_sq[j] = A(0);
  if (first < channels) {
    A shift[VEC];
    load_vec<T, A, VEC>(x + first, shift);
    const auto load_row = [&](int64_t r) { return load_packet<T, VEC>(x + r * channels + first); };
    const auto add_row = [&](const Packet<T, VEC>& v) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A d = convert<A>(v.v[j]) - shift[j];
        sum[j] += d;
        sum_sq[j] += d * d;
      }
    };
    sweep_rows<kRowsInFlight<T>>(rows, static_cast<int64_t>(blockIdx.y) * groups + threadIdx.x / lanes,
                                 static_cast<int64_t>(gridDim.y) * groups, backward, load_row, add_row);
  }
  reduce_tile<A, VEC>(sum, sum_sq, s_a, s_b, lanes, channels, partial, done,
                      StatsTileFinish<T, A, W>{x, finalize});
}

// Gradients: sums of g and g * (x - mean), g = gy masked by the fused ReLU's output when there is one.
// g_masked (with y_relu's mask only): g is stored too, for the input-gradient pass to read instead of gy and
// y, and as the residual's gradient: 7 tensor passes for the two kernels where 8 were (gy, x, y here; gy,
// x, y read and two gradients written there).
template <class A, class W>
struct GradTileFinish {
  GradFinalize<A, W> finalize;
  using Inputs = typename GradFinalize<A, W>::Inputs;
  __device__ Inputs load_inputs(int64_t c) const { return finalize.load_inputs(c); }
  __device__ void operator()(A sum_dy, A sum_dy_xmu, int64_t c, const Inputs& in) const {
    finalize.finish(sum_dy, sum_dy_xmu, c, in);
  }
};

template <class T, class A, class W, int VEC>
__global__ void __launch_bounds__(kReduceBlock, 2)
    grad_nhwc_kernel(const T* x, const T* gy, const T* y_relu, MaskFromX<A, W> from_x, A cap, const A* mean,
                     int64_t channels, int64_t rows, bool backward, int lanes, A* partial, unsigned* done,
                     GradFinalize<A, W> finalize, T* g_masked) {
  __shared__ A s_a[kReduceBlock * VEC], s_b[kReduceBlock * VEC];
  const int groups = kReduceBlock / lanes;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * lanes + threadIdx.x % lanes) * VEC;
  A sum_dy[VEC], sum_dy_xmu[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) sum_dy[j] = sum_dy_xmu[j] = A(0);
  if (first < channels) {
    A m[VEC], scale[VEC], shift[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      m[j] = mean[first + j];
      if (from_x.on()) from_x.load(first + j, mean, scale[j], shift[j]);
    }
    const bool masked = y_relu != nullptr && !from_x.on();
    // One row's gy, x and (when masked) y, loaded before any is used.
    struct Row {
      Packet<T, VEC> g, x, y;
      int64_t i;
    };
    const auto load_row = [&](int64_t r) {
      const int64_t i = r * channels + first;
      Row row;
      row.i = i;
      row.g = load_packet<T, VEC>(gy + i);
      row.x = load_packet<T, VEC>(x + i);
      if (masked) row.y = load_packet<T, VEC>(y_relu + i);
      return row;
    };
    const auto add_row = [&](const Row& row) {
      A gs[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        A g = convert<A>(row.g.v[j]);
        const A xv = convert<A>(row.x.v[j]);
        if (masked && !relu_passes(convert<A>(row.y.v[j]), cap)) g = A(0);  // as masked_grad
        if (from_x.on() && !MaskFromX<A, W>::template passes<T>(xv, scale[j], shift[j], cap)) g = A(0);
        sum_dy[j] += g;
        sum_dy_xmu[j] += g * (xv - m[j]);
        gs[j] = g;
      }
      if (g_masked != nullptr) store_vec<T, A, VEC>(g_masked + row.i, gs);  // exact: a T value or zero
    };
    sweep_rows<kGradRowsInFlight>(rows, static_cast<int64_t>(blockIdx.y) * groups + threadIdx.x / lanes,
                                  static_cast<int64_t>(gridDim.y) * groups, backward, load_row, add_row);
  }
  reduce_tile<A, VEC>(sum_dy, sum_dy_xmu, s_a, s_b, lanes, channels, partial, done,
                      GradTileFinish<A, W>{finalize});
}

// The elementwise passes run on a 2-D grid: x = tiles of lanes * VEC channels (threadIdx.x picks VEC
// consecutive channels), y = row blocks; each thread keeps its channels' constants in registers and walks
// rows, so no element pays a 64-bit modulo or per-channel parameter loads (the flat version of session 8 ran
// at about half of PyTorch's speed on ResNet-50). The grid is one wave (nhwc_elementwise_grid), so its rows
// move through the tensor as one band from row 0 (sweep_rows), after the reduction that read the same tensor
// backward. (Two rows a thread in flight measured level with one: session 33.)
struct NhwcRows {
  int64_t channels, rows;
};

// The normalize pass's epilogue on VEC values at offset i: + residual, then ReLU capped at `cap`
// (relu_capped), stored to y. Shared by the split normalize kernel and the one-launch (resident) forward.
template <typename T, typename A, int VEC>
__device__ __forceinline__ void store_with_epilogue(A (&out)[VEC], const T* residual, bool relu, A cap, T* y,
                                                    int64_t i) {
  if (residual != nullptr) {
    A rv[VEC];
    load_vec<T, A, VEC>(residual + i, rv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] += rv[j];
  }
  if (relu) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = relu_capped(out[j], cap);
  }
  store_vec<T, A, VEC>(y + i, out);
}

// One row's inputs of an elementwise pass, loaded before any is used, and where they are.
template <class T, int VEC>
struct LoadedRow {
  Packet<T, VEC> a, b, c;
  int64_t i;
};

// y = x * scale[c] + shift[c] (+ residual) (ReLU capped at cap), VEC consecutive channels per thread (C % VEC
// == 0; VEC > 1 needs 16-byte aligned data).
template <class T, class W, class A, int VEC>
__global__ void normalize_nhwc_kernel(const T* x, const A* mean, const A* invstd, const W* weight,
                                      const W* bias, NhwcRows shape, const T* residual, bool relu, A cap,
                                      T* y) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= shape.channels) return;
  A scale[VEC], shift[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    bn_scale_shift(convert<A>(weight[c0 + j]), convert<A>(bias[c0 + j]), mean[c0 + j], invstd[c0 + j],
                   scale[j], shift[j]);
  }
  const auto load_row = [&](int64_t r) {
    LoadedRow<T, VEC> row;
    row.i = r * shape.channels + c0;
    row.a = load_packet<T, VEC>(x + row.i);
    return row;
  };
  const auto store_row = [&](const LoadedRow<T, VEC>& row) {
    A out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = bn_affine(convert<A>(row.a.v[j]), scale[j], shift[j]);
    store_with_epilogue<T, A, VEC>(out, residual, relu, cap, y, row.i);
  };
  sweep_rows<1>(shape.rows, static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y,
                static_cast<int64_t>(gridDim.y) * blockDim.y, /*backward=*/false, load_row, store_row);
}

// gx = k1 * (g - k2 - (x - mean) * k3) with g the (ReLU-masked) gy, VEC consecutive channels per thread.
template <class T, class A, class W, int VEC>
__global__ void grad_input_nhwc_kernel(const T* x, const T* gy, const T* y_relu, MaskFromX<A, W> from_x,
                                       A cap, const A* mean, const A* coeff, NhwcRows shape, T* gx,
                                       T* g_residual) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= shape.channels) return;
  A k1[VEC], k2[VEC], k3[VEC], m[VEC], scale[VEC], shift[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const A* k = coeff + (c0 + j) * 3;
    k1[j] = k[0];
    k2[j] = k[1];
    k3[j] = k[2];
    m[j] = mean[c0 + j];
    if (from_x.on()) from_x.load(c0 + j, mean, scale[j], shift[j]);
  }
  // x is needed for the mask (from_x) or the input gradient; loaded once for both.
  const bool need_x = from_x.on() || gx != nullptr;
  const bool read_mask = !from_x.on() && y_relu != nullptr;
  const auto load_row = [&](int64_t r) {
    LoadedRow<T, VEC> row;  // a: gy, b: x, c: the ReLU's output
    row.i = r * shape.channels + c0;
    row.a = load_packet<T, VEC>(gy + row.i);
    if (need_x) row.b = load_packet<T, VEC>(x + row.i);
    if (read_mask) row.c = load_packet<T, VEC>(y_relu + row.i);
    return row;
  };
  const auto store_row = [&](const LoadedRow<T, VEC>& row) {
    A g[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      bool passes = true;
      if (from_x.on()) {
        passes = MaskFromX<A, W>::template passes<T>(convert<A>(row.b.v[j]), scale[j], shift[j], cap);
      } else if (read_mask) {
        passes = relu_passes(convert<A>(row.c.v[j]), cap);  // as masked_grad
      }
      g[j] = passes ? convert<A>(row.a.v[j]) : A(0);
    }
    if (g_residual != nullptr) store_vec<T, A, VEC>(g_residual + row.i, g);
    if (gx != nullptr) {
      A out[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] = k1[j] * (g[j] - k2[j] - (convert<A>(row.b.v[j]) - m[j]) * k3[j]);
      store_vec<T, A, VEC>(gx + row.i, out);
    }
  };
  sweep_rows<1>(shape.rows, static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y,
                static_cast<int64_t>(gridDim.y) * blockDim.y, /*backward=*/false, load_row, store_row);
}

}  // namespace
}  // namespace liftoff::cuda
