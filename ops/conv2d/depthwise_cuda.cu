// Channels-last depthwise convolution kernels (see depthwise.h). Tensors are [pixels][C] in memory; a block
// is (lanes x rows) threads: threadIdx.x picks a vector of V consecutive channels inside the block's channel
// tile (blockIdx.x), threadIdx.y a pixel, so a warp reads whole runs of a pixel row's channels and
// neighbouring pixels of one image row (their windows overlap in L1). Blocks stride over pixels along y.
// All index arithmetic is 32-bit: applies() keeps every tensor under 2^30 elements.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ops/common/channel_vector.cuh"
#include "ops/conv2d/depthwise.h"
#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

constexpr int kThreads = 256;
// Blocks the forward and input-gradient launches aim for (about 8 per SM on an H200): enough to fill the
// device, few enough that each thread handles several pixels (amortising its weight loads).
constexpr int kTargetBlocks = 1024;
// Blocks of the weight gradient's partial kernel: 2 per SM of an H200 (132 SMs), all resident at once (its
// launch bounds ask for 2 per SM). Few blocks, each reducing many pixels, leave few partials to merge. A
// constant rather than the device's SM count: the split, and so the summation order, depends on the shape
// only.
constexpr int kWeightBlocks = 2 * 132;
constexpr int kMaxLanes = 32;
constexpr int kMaxTaps = 7;  // the largest kernel height and width these kernels take
// Partials one thread of the merge adds per step: independent 16-byte loads in flight.
constexpr int kMergeDepth = 8;
constexpr int kMaxMergeRows = 64;
constexpr int64_t kMaxElements = int64_t{1} << 30;

std::atomic<int64_t>& executions() {
  static std::atomic<int64_t> count{0};
  return count;
}

// The convolution's sizes in 32-bit; vecs = C / V channel vectors per pixel.
struct Geometry {
  int n, h, w, c, oh, ow, r, s, stride, pad, vecs;
};

// ---- device helpers ----

template <int N>
__device__ __forceinline__ void zero(float (&v)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = 0.0f;
}

// Pixel p of a [n][height][width] grid.
struct Pixel {
  int n, row, col;
};
__device__ __forceinline__ Pixel pixel_at(int p, int height, int width) {
  const int rest = p / width;
  return {rest / height, rest % height, p % width};
}

// Where tap `tap` (a kernel row or column) of destination coordinate `dst` reads, along one axis; false when
// it reads nothing. Forward (x -> y): x coordinate dst * stride - pad + tap, false in the padding. Transposed
// (gy -> gx): the output (dst + pad - tap) / stride that read input dst through this tap, false unless it
// divides and exists. `stride` is a compile-time constant in the specialised kernels (cheap division).
template <bool kTransposed>
__device__ __forceinline__ bool source_of(int dst, int tap, int stride, int pad, int size, int& src) {
  if constexpr (!kTransposed) {
    src = dst * stride - pad + tap;
    return static_cast<unsigned>(src) < static_cast<unsigned>(size);
  } else {
    const int t = dst + pad - tap;
    if (t < 0) return false;
    const unsigned ut = static_cast<unsigned>(t), us = static_cast<unsigned>(stride);
    if (ut % us != 0) return false;
    src = static_cast<int>(ut / us);
    return src < size;
  }
}

// The weights of one thread's V channels: KR x KS taps in registers (the unrolled sizes), or, for KR == 0
// (any size up to 7x7), read from global memory (L1) at each use.
template <class T, int V, int KR, int KS>
struct Weights {
  static constexpr bool kInRegisters = KR > 0;
  float tap[kInRegisters ? KR * KS : 1][V];
  const T* w;
  int taps;

  __device__ __forceinline__ Weights(const T* weight, int c0, int r, int s)
      : w(weight + c0 * r * s), taps(r * s) {
    if constexpr (kInRegisters) {
#pragma unroll
      for (int t = 0; t < KR * KS; ++t) {
#pragma unroll
        for (int j = 0; j < V; ++j) tap[t][j] = convert<float>(w[j * KR * KS + t]);
      }
    }
  }
  __device__ __forceinline__ float at(int t, int j) const {
    if constexpr (kInRegisters) {
      return tap[t][j];
    } else {
      return convert<float>(w[j * taps + t]);
    }
  }
};

// The two directions that gather over taps, one kernel: dst[pixel, c] = sum over taps (r, s), in row-major
// order, of src[source pixel, c] * w[c, r, s]. Forward: dst = y, src = x. kTransposed (input gradient):
// dst = gx, src = gy, each input pixel gathering the outputs that read it (no atomics). KR = KS = 0: any
// kernel size up to 7x7; STRIDE = 0: any stride.
template <class T, int V, int KR, int KS, int STRIDE, bool kTransposed>
__global__ void __launch_bounds__(kThreads)
    depthwise_gather_kernel(const T* __restrict__ src, const T* __restrict__ weight, T* __restrict__ dst,
                            Geometry g) {
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  if (vec >= g.vecs) return;
  const int c0 = vec * V;
  const int kr = KR > 0 ? KR : g.r, ks = KS > 0 ? KS : g.s;
  const int stride = STRIDE > 0 ? STRIDE : g.stride;
  const int src_h = kTransposed ? g.oh : g.h, src_w = kTransposed ? g.ow : g.w;
  const int dst_h = kTransposed ? g.h : g.oh, dst_w = kTransposed ? g.w : g.ow;
  const Weights<T, V, KR, KS> wt(weight, c0, kr, ks);
  const int pixels = g.n * dst_h * dst_w;
  for (int p = blockIdx.y * blockDim.y + threadIdx.y; p < pixels; p += gridDim.y * blockDim.y) {
    const Pixel px = pixel_at(p, dst_h, dst_w);
    float acc[V];
    zero(acc);
#pragma unroll
    for (int r = 0; r < (KR > 0 ? KR : kMaxTaps); ++r) {
      int sr;
      if (r >= kr || !source_of<kTransposed>(px.row, r, stride, g.pad, src_h, sr)) continue;
      const T* row = src + ((px.n * src_h + sr) * src_w) * g.c + c0;
#pragma unroll
      for (int s = 0; s < (KS > 0 ? KS : kMaxTaps); ++s) {
        int sc;
        if (s >= ks || !source_of<kTransposed>(px.col, s, stride, g.pad, src_w, sc)) continue;
        float v[V];
        load_channels<V>(row + sc * g.c, v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += v[j] * wt.at(r * ks + s, j);
      }
    }
    store_channels<V>(dst + p * g.c + c0, acc);
  }
}

// Adds the block's rows (threadIdx.y) of v (N values per thread) in a fixed halving tree: each step the upper
// rows fold into the lower ones, all N values at once (two barriers a step, log2(rows) steps). Row 0's
// threads end with the sums. Every thread of the block must call it; stage holds N * kThreads / 2 floats.
template <int N>
__device__ __forceinline__ void block_sum_rows(float* stage, float (&v)[N]) {
  const int lanes = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
  for (int active = blockDim.y; active > 1;) {
    const int half = (active + 1) / 2;
    const int folded = active - half;  // rows [half, active) fold into rows [0, folded)
    if (ty >= half && ty < active) {
#pragma unroll
      for (int k = 0; k < N; ++k) stage[(k * folded + ty - half) * lanes + tx] = v[k];
    }
    __syncthreads();
    if (ty < folded) {
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] += stage[(k * folded + ty) * lanes + tx];
    }
    __syncthreads();  // the stage is rewritten by the next step
    active = half;
  }
}

// Partial weight gradients: block (tile, split, z) sums gy * x over its split's output pixels for kernel
// rows z * RB .. z * RB + RB - 1 and columns < SMAX (guarded by R, S), reduces its rows, and writes
// partials[split][c * R * S + tap] (f32, gw's own order; rows row_stride floats apart). RB x SMAX x V
// accumulators per thread; each pixel's RB x SMAX + 1 loads are independent (in flight together).
template <class T, int V, int RB, int SMAX>
__global__ void __launch_bounds__(kThreads, 2)
    depthwise_weight_partial_kernel(const T* __restrict__ x, const T* __restrict__ gy,
                                    float* __restrict__ partials, Geometry g, int row_stride) {
  constexpr int kValues = RB * SMAX * V;
  __shared__ float stage[kValues * kThreads / 2];
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = vec < g.vecs;
  const int c0 = vec * V;
  const int r0 = blockIdx.z * RB;
  float acc[kValues];
  zero(acc);
  const int pixels = g.n * g.oh * g.ow;
  for (int p = blockIdx.y * blockDim.y + threadIdx.y; active && p < pixels; p += gridDim.y * blockDim.y) {
    const Pixel px = pixel_at(p, g.oh, g.ow);
    float go[V];
    load_channels<V>(gy + p * g.c + c0, go);
#pragma unroll
    for (int a = 0; a < RB; ++a) {
      int ih;
      if (r0 + a >= g.r || !source_of<false>(px.row, r0 + a, g.stride, g.pad, g.h, ih)) continue;
      const T* row = x + ((px.n * g.h + ih) * g.w) * g.c + c0;
#pragma unroll
      for (int b = 0; b < SMAX; ++b) {
        int iw;
        if (b >= g.s || !source_of<false>(px.col, b, g.stride, g.pad, g.w, iw)) continue;
        float xv[V];
        load_channels<V>(row + iw * g.c, xv);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[(a * SMAX + b) * V + j] += go[j] * xv[j];
      }
    }
  }
  block_sum_rows<kValues>(stage, acc);
  if (threadIdx.y != 0 || !active) return;
  const int taps = g.r * g.s;
  float* out = partials + static_cast<int64_t>(blockIdx.y) * row_stride + c0 * taps;
#pragma unroll
  for (int a = 0; a < RB; ++a) {
#pragma unroll
    for (int b = 0; b < SMAX; ++b) {
      if (r0 + a >= g.r || b >= g.s) continue;
#pragma unroll
      for (int j = 0; j < V; ++j) out[j * taps + (r0 + a) * g.s + b] = acc[(a * SMAX + b) * V + j];
    }
  }
}

// The 4 floats p[0 .. count) (zeros past count, or all zeros unless `present`): one 16-byte load when whole.
__device__ __forceinline__ void load_four(const float* p, bool present, int count, float (&out)[4]) {
  if (present && count >= 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = present && j < count ? p[j] : 0.0f;
}

// gw[i] = sum over the splits of partials[split][i], i < total, in a fixed order: a thread owns 4 consecutive
// values (one 16-byte load per split) and thread row y adds splits y * D .. y * D + D - 1 (D = kMergeDepth,
// loads in flight together), then y + rows, ...; the block's rows are then added in block_sum_rows' tree.
// row_stride is a multiple of 4 (16-byte aligned rows).
template <class T>
__global__ void __launch_bounds__(kThreads)
    depthwise_weight_merge_kernel(const float* __restrict__ partials, T* __restrict__ gw, int splits,
                                  int total, int row_stride) {
  __shared__ float stage[4 * kThreads / 2];
  const int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  float sum[4];
  zero(sum);
  if (i0 < total) {
    const int count = total - i0;
    for (int first = threadIdx.y * kMergeDepth; first < splits; first += blockDim.y * kMergeDepth) {
      float part[kMergeDepth][4];
#pragma unroll
      for (int k = 0; k < kMergeDepth; ++k) {
        const int split = first + k;
        load_four(partials + static_cast<int64_t>(split) * row_stride + i0, split < splits, count, part[k]);
      }
#pragma unroll
      for (int k = 0; k < kMergeDepth; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sum[j] += part[k][j];
      }
    }
  }
  block_sum_rows<4>(stage, sum);
  if (threadIdx.y != 0) return;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (i0 + j < total) gw[i0 + j] = convert<T>(sum[j]);
  }
}

// ---- host side ----

Geometry geometry_of(const Conv2dShape& g, int vec) {
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  return {i32(g.n), i32(g.h), i32(g.w),      i32(g.c),       i32(g.oh),     i32(g.ow),
          i32(g.r), i32(g.s), i32(g.stride), i32(g.padding), i32(g.c / vec)};
}

// Channel tiles of up to kMaxLanes vectors (equal sizes, so few threads idle), kThreads / lanes pixel rows,
// and enough pixel blocks for about `target` blocks in all. A function of the shape only: the weight
// gradient's split (and so its summation order) does not depend on the device.
struct Launch {
  dim3 grid, block;
};
Launch launch_for(int vecs, int64_t pixels, int target, int z = 1) {
  const int tiles = (vecs + kMaxLanes - 1) / kMaxLanes;
  const int lanes = (vecs + tiles - 1) / tiles;
  const int rows = std::max(1, kThreads / lanes);
  const int64_t row_blocks = std::max<int64_t>(1, (pixels + rows - 1) / rows);
  const int64_t wanted = std::max<int64_t>(1, target / (static_cast<int64_t>(tiles) * z));
  const int64_t splits = std::min<int64_t>({row_blocks, wanted, 65535});
  return {dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits), static_cast<unsigned>(z)),
          dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows))};
}

// The merge: thread rows enough that each adds about kMergeDepth splits (a power of two, at most
// kMaxMergeRows), the rest of the block's threads over the values, 4 each.
Launch merge_launch(int splits, int total) {
  int rows = 1;
  while (rows < kMaxMergeRows && rows * kMergeDepth < splits) rows *= 2;
  const int lanes = kThreads / rows;
  const int quads = (total + 3) / 4;
  return {dim3(static_cast<unsigned>((quads + lanes - 1) / lanes)),
          dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows))};
}

// Runs fn(T{}, integral_constant<V>) with the 16-byte vector width of dtype when C and every pointer allow
// it, else with V = 1.
template <class Fn>
void dispatch_vector(DType dtype, const Conv2dShape& g, std::initializer_list<const Tensor*> ts, Fn&& fn) {
  dispatch_device_float(dtype, "conv2d (depthwise)", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      throw DTypeError("conv2d (depthwise): internal: f64 has no depthwise kernel");
    } else {
      constexpr int kWide = kChannelVector<T>;
      const bool fits = std::all_of(ts.begin(), ts.end(), [&](const Tensor* t) {
        return channel_pack_fits(t->raw_data(), g.c, kWide, sizeof(T));
      });
      if (fits) {
        fn(T{}, std::integral_constant<int, kWide>{});
      } else {
        fn(T{}, std::integral_constant<int, 1>{});
      }
    }
  });
}

// Forward (src x, dst y) or input gradient (kTransposed: src gy, dst gx): 3x3 kernels unrolled with their
// weights in registers, strides 1 and 2 compiled in.
template <bool kTransposed>
void run_gather(const Tensor& src, const Tensor& w, const Tensor& dst, const Conv2dShape& g) {
  const int device = src.device().index;
  dispatch_vector(src.dtype(), g, {&src, &dst}, [&](auto tag, auto width) {
    using T = decltype(tag);
    constexpr int V = decltype(width)::value;
    const Geometry geo = geometry_of(g, V);
    const int64_t pixels = kTransposed ? g.n * g.h * g.w : g.n * g.oh * g.ow;
    const Launch l = launch_for(geo.vecs, pixels, kTargetBlocks);
    const auto* sp = static_cast<const T*>(src.raw_data());
    const auto* wp = static_cast<const T*>(w.raw_data());
    auto* dp = static_cast<T*>(dst.raw_data());
    const auto launch = [&](auto kernel) {
      kernel<<<l.grid, l.block, 0, compute_stream(device)>>>(sp, wp, dp, geo);
    };
    if (g.r == 3 && g.s == 3 && g.stride == 1) {
      launch(depthwise_gather_kernel<T, V, 3, 3, 1, kTransposed>);
    } else if (g.r == 3 && g.s == 3 && g.stride == 2) {
      launch(depthwise_gather_kernel<T, V, 3, 3, 2, kTransposed>);
    } else if (g.r == 3 && g.s == 3) {
      launch(depthwise_gather_kernel<T, V, 3, 3, 0, kTransposed>);
    } else {
      launch(depthwise_gather_kernel<T, V, 0, 0, 0, kTransposed>);
    }
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int64_t depthwise_executions() {
  return executions().load(std::memory_order_relaxed);
}

namespace depthwise {

bool applies(const Conv2dShape& g, DType dtype) {
  if (!g.channels_last || g.groups != g.c || g.k != g.c || g.dilation != 1) return false;
  if (g.r < 1 || g.r > kMaxTaps || g.s < 1 || g.s > kMaxTaps) return false;
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) return false;
  if (g.n * g.c * g.h * g.w >= kMaxElements || g.n * g.k * g.oh * g.ow >= kMaxElements) return false;
  if (g.c * g.r * g.s >= kMaxElements) return false;  // the weight gradient's partial rows
  return config::get_string(config::Knob::depthwise).value_or("auto") != "cudnn";
}

void forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dShape& g) {
  run_gather<false>(x, w, y, g);
}

void backward_data(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dShape& g) {
  run_gather<true>(gy, w, gx, g);
}

void backward_weight(const Tensor& x, const Tensor& gy, const Tensor& gw, const Conv2dShape& g) {
  const int device = gy.device().index;
  const int total = static_cast<int>(g.c * g.r * g.s);
  const int row_stride = (total + 3) / 4 * 4;  // 16-byte aligned partial rows for the merge's loads
  // Kernels up to 3x3 keep all taps per thread; larger ones one kernel row per block (grid z).
  const bool small = g.r <= 3 && g.s <= 3;
  const int z = small ? 1 : static_cast<int>(g.r);
  dispatch_vector(gy.dtype(), g, {&x, &gy}, [&](auto tag, auto width) {
    using T = decltype(tag);
    constexpr int V = decltype(width)::value;
    const Geometry geo = geometry_of(g, V);
    const Launch l = launch_for(geo.vecs, g.n * g.oh * g.ow, kWeightBlocks, z);
    const int splits = static_cast<int>(l.grid.y);
    const Tensor partials = Tensor::empty({int64_t{splits} * row_stride}, DType::f32, gy.device());
    const auto* xp = static_cast<const T*>(x.raw_data());
    const auto* gyp = static_cast<const T*>(gy.raw_data());
    auto* pp = static_cast<float*>(partials.raw_data());
    if (small) {
      depthwise_weight_partial_kernel<T, V, 3, 3>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(xp, gyp, pp, geo, row_stride);
    } else {
      depthwise_weight_partial_kernel<T, V, 1, kMaxTaps>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(xp, gyp, pp, geo, row_stride);
    }
    LIFTOFF_LAUNCH_CHECK();
    const Launch m = merge_launch(splits, total);
    depthwise_weight_merge_kernel<T><<<m.grid, m.block, 0, compute_stream(device)>>>(
        pp, static_cast<T*>(gw.raw_data()), splits, total, row_stride);
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace depthwise
}  // namespace liftoff::cuda
