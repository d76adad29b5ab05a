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
// Blocks a launch aims for (about 8 per SM on an H200): enough to fill the device, few enough that each
// thread handles several pixels (amortising its weight loads, or its accumulators' block reduction).
constexpr int kTargetBlocks = 1024;
constexpr int kMaxLanes = 32;
constexpr int kMaxTaps = 7;  // the largest kernel height and width these kernels take
constexpr int64_t kMaxElements = int64_t{1} << 30;

std::atomic<int64_t>& executions() {
  static std::atomic<int64_t> count{0};
  return count;
}

// The convolution's sizes in 32-bit; vecs = C / V channel vectors per pixel.
struct Geometry {
  int n, h, w, c, oh, ow, r, s, stride, pad, vecs;
};

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

// y[pixel, c] = sum over taps of x[window tap, c] * w[c, tap], taps in row-major order.
template <class T, int V, int KR, int KS>
__global__ void __launch_bounds__(kThreads)
    depthwise_forward_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                             Geometry g) {
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  if (vec >= g.vecs) return;
  const int c0 = vec * V;
  const int kr = KR > 0 ? KR : g.r, ks = KS > 0 ? KS : g.s;
  const Weights<T, V, KR, KS> wt(weight, c0, kr, ks);
  const int pixels = g.n * g.oh * g.ow;
  for (int p = blockIdx.y * blockDim.y + threadIdx.y; p < pixels; p += gridDim.y * blockDim.y) {
    const int ow = p % g.ow;
    const int rest = p / g.ow;
    const int oh = rest % g.oh;
    const int n = rest / g.oh;
    const int ih0 = oh * g.stride - g.pad, iw0 = ow * g.stride - g.pad;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < (KR > 0 ? KR : kMaxTaps); ++r) {
      const int ih = ih0 + r;
      if (r >= kr || static_cast<unsigned>(ih) >= static_cast<unsigned>(g.h)) continue;
      const T* row = x + ((n * g.h + ih) * g.w) * g.c + c0;
#pragma unroll
      for (int s = 0; s < (KS > 0 ? KS : kMaxTaps); ++s) {
        const int iw = iw0 + s;
        if (s >= ks || static_cast<unsigned>(iw) >= static_cast<unsigned>(g.w)) continue;
        float xv[V];
        load_channels<V>(row + iw * g.c, xv);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += xv[j] * wt.at(r * ks + s, j);
      }
    }
    store_channels<V>(y + p * g.c + c0, acc);
  }
}

// gx[pixel, c] = sum over the taps (r, s) whose output (ih + p - r) / stride, (iw + p - s) / stride exists
// (divisible, in range) of gy[output, c] * w[c, r, s]: a gather, no atomics.
template <class T, int V, int KR, int KS>
__global__ void __launch_bounds__(kThreads)
    depthwise_backward_data_kernel(const T* __restrict__ gy, const T* __restrict__ weight, T* __restrict__ gx,
                                   Geometry g) {
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  if (vec >= g.vecs) return;
  const int c0 = vec * V;
  const int kr = KR > 0 ? KR : g.r, ks = KS > 0 ? KS : g.s;
  const Weights<T, V, KR, KS> wt(weight, c0, kr, ks);
  const int pixels = g.n * g.h * g.w;
  for (int p = blockIdx.y * blockDim.y + threadIdx.y; p < pixels; p += gridDim.y * blockDim.y) {
    const int iw = p % g.w;
    const int rest = p / g.w;
    const int ih = rest % g.h;
    const int n = rest / g.h;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < (KR > 0 ? KR : kMaxTaps); ++r) {
      const int th = ih + g.pad - r;
      if (r >= kr || th < 0 || (g.stride != 1 && th % g.stride != 0)) continue;
      const int oh = g.stride == 1 ? th : th / g.stride;
      if (oh >= g.oh) continue;
      const T* row = gy + ((n * g.oh + oh) * g.ow) * g.c + c0;
#pragma unroll
      for (int s = 0; s < (KS > 0 ? KS : kMaxTaps); ++s) {
        const int tw = iw + g.pad - s;
        if (s >= ks || tw < 0 || (g.stride != 1 && tw % g.stride != 0)) continue;
        const int ow = g.stride == 1 ? tw : tw / g.stride;
        if (ow >= g.ow) continue;
        float gv[V];
        load_channels<V>(row + ow * g.c, gv);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += gv[j] * wt.at(r * ks + s, j);
      }
    }
    store_channels<V>(gx + p * g.c + c0, acc);
  }
}

// Adds the block's rows (threadIdx.y) of `value` (V per thread) in a fixed tree; row 0's threads get the sum.
// Every thread of the block must call it. stage holds V * blockDim.x * blockDim.y floats.
template <int V>
__device__ __forceinline__ void block_sum_rows(float* stage, float (&value)[V]) {
  const int lanes = blockDim.x, rows = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  auto at = [&](int j, int row) -> float& { return stage[(j * rows + row) * lanes + tx]; };
#pragma unroll
  for (int j = 0; j < V; ++j) at(j, ty) = value[j];
  int span = 1;
  while (span < rows) span *= 2;
  for (int half = span / 2; half >= 1; half /= 2) {
    __syncthreads();
    if (ty < half && ty + half < rows) {
#pragma unroll
      for (int j = 0; j < V; ++j) at(j, ty) += at(j, ty + half);
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < V; ++j) value[j] = at(j, 0);
  __syncthreads();  // the stage is reused by the next call
}

// Partial weight gradients: block (tile, split, z) sums gy * x over its split's output pixels for kernel
// rows z * RB .. z * RB + RB - 1 and columns < SMAX (guarded by R, S), then writes
// partials[split][tap][c] (f32). RB x SMAX x V accumulators per thread.
template <class T, int V, int RB, int SMAX>
__global__ void __launch_bounds__(kThreads)
    depthwise_weight_partial_kernel(const T* __restrict__ x, const T* __restrict__ gy,
                                    float* __restrict__ partials, Geometry g) {
  __shared__ float stage[V * kThreads];
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = vec < g.vecs;
  const int c0 = vec * V;
  const int r0 = blockIdx.z * RB;
  float acc[RB][SMAX][V];
#pragma unroll
  for (int a = 0; a < RB; ++a) {
#pragma unroll
    for (int b = 0; b < SMAX; ++b) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[a][b][j] = 0.0f;
    }
  }
  const int pixels = g.n * g.oh * g.ow;
  if (active) {
    for (int p = blockIdx.y * blockDim.y + threadIdx.y; p < pixels; p += gridDim.y * blockDim.y) {
      const int ow = p % g.ow;
      const int rest = p / g.ow;
      const int oh = rest % g.oh;
      const int n = rest / g.oh;
      float go[V];
      load_channels<V>(gy + p * g.c + c0, go);
#pragma unroll
      for (int a = 0; a < RB; ++a) {
        const int ih = oh * g.stride - g.pad + r0 + a;
        if (r0 + a >= g.r || static_cast<unsigned>(ih) >= static_cast<unsigned>(g.h)) continue;
        const T* row = x + ((n * g.h + ih) * g.w) * g.c + c0;
#pragma unroll
        for (int b = 0; b < SMAX; ++b) {
          const int iw = ow * g.stride - g.pad + b;
          if (b >= g.s || static_cast<unsigned>(iw) >= static_cast<unsigned>(g.w)) continue;
          float xv[V];
          load_channels<V>(row + iw * g.c, xv);
#pragma unroll
          for (int j = 0; j < V; ++j) acc[a][b][j] += go[j] * xv[j];
        }
      }
    }
  }
  const int taps = g.r * g.s;
#pragma unroll
  for (int a = 0; a < RB; ++a) {
#pragma unroll
    for (int b = 0; b < SMAX; ++b) {
      if (r0 + a >= g.r || b >= g.s) continue;  // uniform across the block
      block_sum_rows<V>(stage, acc[a][b]);
      if (threadIdx.y == 0 && active) {
        float* out = partials + (static_cast<int64_t>(blockIdx.y) * taps + (r0 + a) * g.s + b) * g.c + c0;
#pragma unroll
        for (int j = 0; j < V; ++j) out[j] = acc[a][b][j];
      }
    }
  }
}

// gw[c, tap] = sum of partials[split][tap][c] over the splits, in split order.
template <class T>
__global__ void depthwise_weight_finish_kernel(const float* __restrict__ partials, T* __restrict__ gw,
                                               int splits, int taps, int channels) {
  const int total = taps * channels;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int tap = i / channels, c = i % channels;
    float sum = 0.0f;
    for (int split = 0; split < splits; ++split)
      sum += partials[(static_cast<int64_t>(split) * taps + tap) * channels + c];
    gw[c * taps + tap] = convert<T>(sum);
  }
}

// ---- host side ----

Geometry geometry_of(const Conv2dShape& g, int vec) {
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  return {i32(g.n), i32(g.h), i32(g.w),      i32(g.c),       i32(g.oh),     i32(g.ow),
          i32(g.r), i32(g.s), i32(g.stride), i32(g.padding), i32(g.c / vec)};
}

// The widest vector (`wide` channels, else 1) that divides C and to which every pointer is aligned.
int vector_width(const Conv2dShape& g, int wide, size_t element_bytes,
                 std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (!channel_pack_fits(t->raw_data(), g.c, wide, element_bytes)) return 1;
  }
  return wide;
}

// Channel tiles of up to kMaxLanes vectors (equal sizes, so few threads idle), kThreads / lanes pixel rows,
// and enough pixel blocks for about kTargetBlocks blocks in all. A function of the shape only: the weight
// gradient's split (and so its summation order) does not depend on the device.
struct Launch {
  dim3 grid, block;
};
Launch launch_for(int vecs, int64_t pixels, int z = 1) {
  const int tiles = (vecs + kMaxLanes - 1) / kMaxLanes;
  const int lanes = (vecs + tiles - 1) / tiles;
  const int rows = std::max(1, kThreads / lanes);
  const int64_t row_blocks = std::max<int64_t>(1, (pixels + rows - 1) / rows);
  const int64_t wanted = std::max<int64_t>(1, kTargetBlocks / (static_cast<int64_t>(tiles) * z));
  const int64_t splits = std::min<int64_t>({row_blocks, wanted, 65535});
  return {dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits), static_cast<unsigned>(z)),
          dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows))};
}

// Runs fn(T{}, integral_constant<V>) with the 16-byte vector width of dtype when the shape and pointers allow
// it, else 1.
template <class Fn>
void dispatch_vector(DType dtype, const Conv2dShape& g, bool narrow, std::initializer_list<const Tensor*> ts,
                     Fn&& fn) {
  dispatch_device_float(dtype, "conv2d (depthwise)", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      throw DTypeError("conv2d (depthwise): internal: f64 has no depthwise kernel");
    } else {
      constexpr int kWide = kChannelVector<T>;
      // The weight gradient holds R*S*V accumulators: it takes 4 channels (8 bytes for half types).
      constexpr int kNarrow = 4;
      const int wide = narrow ? kNarrow : kWide;
      if (vector_width(g, wide, sizeof(T), ts) == wide) {
        if (narrow) {
          fn(T{}, std::integral_constant<int, kNarrow>{});
        } else {
          fn(T{}, std::integral_constant<int, kWide>{});
        }
      } else {
        fn(T{}, std::integral_constant<int, 1>{});
      }
    }
  });
}

bool is_3x3(const Conv2dShape& g) {
  return g.r == 3 && g.s == 3;
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
  return config::get_string(config::Knob::depthwise).value_or("auto") != "cudnn";
}

void forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dShape& g) {
  const int device = x.device().index;
  dispatch_vector(x.dtype(), g, false, {&x, &y}, [&](auto tag, auto width) {
    using T = decltype(tag);
    constexpr int V = decltype(width)::value;
    const Geometry geo = geometry_of(g, V);
    const Launch l = launch_for(geo.vecs, g.n * g.oh * g.ow);
    const auto* xp = static_cast<const T*>(x.raw_data());
    const auto* wp = static_cast<const T*>(w.raw_data());
    auto* yp = static_cast<T*>(y.raw_data());
    if (is_3x3(g)) {
      depthwise_forward_kernel<T, V, 3, 3><<<l.grid, l.block, 0, compute_stream(device)>>>(xp, wp, yp, geo);
    } else {
      depthwise_forward_kernel<T, V, 0, 0><<<l.grid, l.block, 0, compute_stream(device)>>>(xp, wp, yp, geo);
    }
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

void backward_data(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dShape& g) {
  const int device = gy.device().index;
  dispatch_vector(gy.dtype(), g, false, {&gy, &gx}, [&](auto tag, auto width) {
    using T = decltype(tag);
    constexpr int V = decltype(width)::value;
    const Geometry geo = geometry_of(g, V);
    const Launch l = launch_for(geo.vecs, g.n * g.h * g.w);
    const auto* gyp = static_cast<const T*>(gy.raw_data());
    const auto* wp = static_cast<const T*>(w.raw_data());
    auto* gxp = static_cast<T*>(gx.raw_data());
    if (is_3x3(g)) {
      depthwise_backward_data_kernel<T, V, 3, 3>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(gyp, wp, gxp, geo);
    } else {
      depthwise_backward_data_kernel<T, V, 0, 0>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(gyp, wp, gxp, geo);
    }
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

void backward_weight(const Tensor& x, const Tensor& gy, const Tensor& gw, const Conv2dShape& g) {
  const int device = gy.device().index;
  const int64_t taps = g.r * g.s;
  // Kernels up to 3x3 keep all taps per thread; larger ones one kernel row per block (grid z).
  const bool small = g.r <= 3 && g.s <= 3;
  const int z = small ? 1 : static_cast<int>(g.r);
  dispatch_vector(gy.dtype(), g, true, {&x, &gy}, [&](auto tag, auto width) {
    using T = decltype(tag);
    constexpr int V = decltype(width)::value;
    const Geometry geo = geometry_of(g, V);
    const Launch l = launch_for(geo.vecs, g.n * g.oh * g.ow, z);
    const int splits = static_cast<int>(l.grid.y);
    const Tensor partials = Tensor::empty({splits * taps * g.c}, DType::f32, gy.device());
    const auto* xp = static_cast<const T*>(x.raw_data());
    const auto* gyp = static_cast<const T*>(gy.raw_data());
    auto* pp = static_cast<float*>(partials.raw_data());
    if (small) {
      depthwise_weight_partial_kernel<T, V, 3, 3>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(xp, gyp, pp, geo);
    } else {
      depthwise_weight_partial_kernel<T, V, 1, kMaxTaps>
          <<<l.grid, l.block, 0, compute_stream(device)>>>(xp, gyp, pp, geo);
    }
    LIFTOFF_LAUNCH_CHECK();
    const int total = static_cast<int>(taps * g.c);
    depthwise_weight_finish_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        pp, static_cast<T*>(gw.raw_data()), splits, static_cast<int>(taps), static_cast<int>(g.c));
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace depthwise
}  // namespace liftoff::cuda
