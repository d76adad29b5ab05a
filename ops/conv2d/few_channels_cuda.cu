// Channels-last convolution kernels for few input channels (see few_channels.h). Tensors are [pixels][C]
// (x), [pixels][K] (y, gy) and [K][R*S*C] (w, gw, KRSC) in memory; a tap j = (r*S + s)*C + c indexes one
// input value of a pixel's receptive field, in the order KRSC stores a filter. Index arithmetic is 32-bit:
// applies() keeps every tensor under 2^31 elements.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/conv2d/few_channels.h"
#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxChannels = 4;
constexpr int kMaxFilters = 64;
// LIFTOFF_FEW_CHANNEL_CONV=auto's filter limits (applies(), applies_to_weight_gradient()).
constexpr int kAutoMaxForwardFilters = 32;
constexpr int kAutoMaxWeightGradientFilters = 16;
constexpr int kMaxTaps = 64;  // C * R * S: the weight gradient's 4x4 blocks for 64 x 64 fill 256 threads
// Filters one forward thread computes: 16 accumulators, one 64-byte (f32) or 32-byte (half) output run.
constexpr int kFiltersPerThread = 16;
// Output pixels a forward thread computes when K > 16 (the weights of a tap loaded once for all of them).
constexpr int kWidePixels = 4;
// Blocks of the forward's grid-stride loop: each loads the weights into shared memory once.
constexpr int kForwardBlocks = 2048;
// Pixels staged per tile of the weight gradient, and its blocks: a constant (not the device's SM count) so
// the split, and so the summation order, depends on the shape only.
constexpr int kTile = 64;
constexpr int kWeightBlocks = 1024;
constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;

std::atomic<int64_t>& executions() {
  static std::atomic<int64_t> count{0};
  return count;
}

// The convolution's sizes in 32-bit. taps = C*R*S; k_pad and taps_pad: K and taps rounded up to what a
// kernel's vector reads cover (the padded rows of its shared-memory tables hold zeros).
struct Geometry {
  int n, h, w, c, oh, ow, k, r, s, stride, pad, dilation, taps, k_pad, taps_pad, pixels;
};

Geometry geometry_of(const Conv2dShape& g, int k_multiple) {
  Geometry geo{};
  geo.n = static_cast<int>(g.n);
  geo.h = static_cast<int>(g.h);
  geo.w = static_cast<int>(g.w);
  geo.c = static_cast<int>(g.c);
  geo.oh = static_cast<int>(g.oh);
  geo.ow = static_cast<int>(g.ow);
  geo.k = static_cast<int>(g.k);
  geo.r = static_cast<int>(g.r);
  geo.s = static_cast<int>(g.s);
  geo.stride = static_cast<int>(g.stride);
  geo.pad = static_cast<int>(g.padding);
  geo.dilation = static_cast<int>(g.dilation);
  geo.taps = geo.c * geo.r * geo.s;
  geo.k_pad = (geo.k + k_multiple - 1) / k_multiple * k_multiple;
  geo.taps_pad = (geo.taps + 3) / 4 * 4;
  geo.pixels = static_cast<int>(g.n * g.oh * g.ow);
  return geo;
}

// The first input pixel (top-left of the receptive field) of output pixel p, and its image's row offset.
struct Window {
  int image_row0;  // n * H: the image's first row in x
  int ih0, iw0;
};
__device__ __forceinline__ Window window_of(int p, const Geometry& geo) {
  const int ow = p % geo.ow;
  const int rest = p / geo.ow;
  const int oh = rest % geo.oh;
  const int n = rest / geo.oh;
  return {n * geo.h, oh * geo.stride - geo.pad, ow * geo.stride - geo.pad};
}

// ---- forward: thread (p, chunk) computes y[p, chunk*16 .. +16) ----

// The block's weights as [taps][k_pad] floats in shared memory, zero past K (w is KRSC).
template <class T>
__device__ __forceinline__ void stage_forward_weights(const T* __restrict__ w, float* weights,
                                                      const Geometry& geo) {
  for (int e = threadIdx.x; e < geo.taps * geo.k_pad; e += blockDim.x) {
    const int j = e / geo.k_pad, k = e % geo.k_pad;
    weights[e] = k < geo.k ? convert<float>(w[k * geo.taps + j]) : 0.0f;
  }
  __syncthreads();
}

// One pixel's 16 outputs from filter k0 on: 16-byte stores (kVector), else one by one up to K.
template <class T, bool kVector>
__device__ __forceinline__ void store_filter_run(T* out, const float (&acc)[kFiltersPerThread], int k0,
                                                 const Geometry& geo) {
  if constexpr (kVector) {
    // 16 outputs: four 16-byte stores in f32, two in f16/bf16.
    constexpr int kPerStore = 16 / sizeof(T);
#pragma unroll
    for (int q = 0; q < kFiltersPerThread / kPerStore; ++q) {
      union {
        uint4 raw;
        T v[kPerStore];
      } pack;
#pragma unroll
      for (int i = 0; i < kPerStore; ++i) pack.v[i] = convert<T>(acc[q * kPerStore + i]);
      reinterpret_cast<uint4*>(out)[q] = pack.raw;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kFiltersPerThread; ++i) {
      if (k0 + i < geo.k) out[i] = convert<T>(acc[i]);
    }
  }
}

// kVector: 16-byte stores of the output run (the caller checked alignment and K). No launch bounds: with
// them ptxas capped the registers at 48 and spilled the accumulators.
template <class T, int C, bool kVector>
__global__ void few_channels_forward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                            T* __restrict__ y, Geometry geo) {
  extern __shared__ float4 forward_shared[];
  float* weights = reinterpret_cast<float*>(forward_shared);  // [taps][k_pad], zero past K
  stage_forward_weights(w, weights, geo);
  // Items fit 32 bits: pixels * chunks <= pixels * K < 2^31 (applies()); unsigned, so the stride cannot wrap.
  const unsigned chunks = geo.k_pad / kFiltersPerThread;
  const unsigned items = static_cast<unsigned>(geo.pixels) * chunks;
  for (unsigned item = blockIdx.x * blockDim.x + threadIdx.x; item < items; item += gridDim.x * blockDim.x) {
    const int p = static_cast<int>(item / chunks);
    const int k0 = static_cast<int>(item % chunks) * kFiltersPerThread;
    const Window win = window_of(p, geo);
    float acc[kFiltersPerThread];
#pragma unroll
    for (int i = 0; i < kFiltersPerThread; ++i) acc[i] = 0.0f;
    for (int r = 0; r < geo.r; ++r) {
      const int ih = win.ih0 + r * geo.dilation;
      if (static_cast<unsigned>(ih) >= static_cast<unsigned>(geo.h)) continue;
      const T* row = x + static_cast<int64_t>(win.image_row0 + ih) * geo.w * C;
      for (int s = 0; s < geo.s; ++s) {
        const int iw = win.iw0 + s * geo.dilation;
        if (static_cast<unsigned>(iw) >= static_cast<unsigned>(geo.w)) continue;
        const float* tap_weights = weights + ((r * geo.s + s) * C) * geo.k_pad + k0;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float v = convert<float>(row[iw * C + c]);
          const float4* wv = reinterpret_cast<const float4*>(tap_weights + c * geo.k_pad);
#pragma unroll
          for (int q = 0; q < kFiltersPerThread / 4; ++q) {
            const float4 f = wv[q];
            acc[4 * q] += v * f.x;
            acc[4 * q + 1] += v * f.y;
            acc[4 * q + 2] += v * f.z;
            acc[4 * q + 3] += v * f.w;
          }
        }
      }
    }
    store_filter_run<T, kVector>(y + static_cast<int64_t>(p) * geo.k + k0, acc, k0, geo);
  }
}

// ---- forward for more than 16 filters: thread (pixel group, chunk) computes y[p, chunk*16 .. +16) for PIX
// consecutive pixels p ----

// As few_channels_forward_kernel, but each tap's weights (shared memory) serve PIX pixels, and the PIX * C
// input values are loaded before the FMAs (a tap outside the image adds zero). 114-128 registers, no spills
// (sm_90, ptxas -v).
template <class T, int C, bool kVector, int PIX>
__global__ void few_channels_forward_wide_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                 T* __restrict__ y, Geometry geo) {
  extern __shared__ float4 forward_shared[];
  float* weights = reinterpret_cast<float*>(forward_shared);  // [taps][k_pad], zero past K
  stage_forward_weights(w, weights, geo);
  // Items fit 32 bits: groups * chunks <= pixels * K < 2^31 (applies()); unsigned, so the stride cannot wrap.
  const unsigned chunks = geo.k_pad / kFiltersPerThread;
  const unsigned groups = (static_cast<unsigned>(geo.pixels) + PIX - 1) / PIX;
  const unsigned items = groups * chunks;
  for (unsigned item = blockIdx.x * blockDim.x + threadIdx.x; item < items; item += gridDim.x * blockDim.x) {
    const int p0 = static_cast<int>(item / chunks) * PIX;
    const int k0 = static_cast<int>(item % chunks) * kFiltersPerThread;
    Window win[PIX];
    bool valid[PIX];
#pragma unroll
    for (int i = 0; i < PIX; ++i) {
      valid[i] = p0 + i < geo.pixels;
      win[i] = window_of(valid[i] ? p0 + i : p0, geo);
    }
    float acc[PIX][kFiltersPerThread];
#pragma unroll
    for (int i = 0; i < PIX; ++i) {
#pragma unroll
      for (int f = 0; f < kFiltersPerThread; ++f) acc[i][f] = 0.0f;
    }
    for (int r = 0; r < geo.r; ++r) {
      for (int s = 0; s < geo.s; ++s) {
        // The tap's C input values of each pixel (zero outside the image: adds nothing), loaded first.
        float v[PIX][C];
        bool any = false;
#pragma unroll
        for (int i = 0; i < PIX; ++i) {
          const int ih = win[i].ih0 + r * geo.dilation, iw = win[i].iw0 + s * geo.dilation;
          const bool inside = valid[i] && static_cast<unsigned>(ih) < static_cast<unsigned>(geo.h) &&
                              static_cast<unsigned>(iw) < static_cast<unsigned>(geo.w);
          any = any || inside;
          const T* at = inside ? x + (static_cast<int64_t>(win[i].image_row0 + ih) * geo.w + iw) * C : x;
#pragma unroll
          for (int c = 0; c < C; ++c) v[i][c] = inside ? convert<float>(at[c]) : 0.0f;
        }
        if (!any) continue;
        const float* tap_weights = weights + ((r * geo.s + s) * C) * geo.k_pad + k0;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float4* wv = reinterpret_cast<const float4*>(tap_weights + c * geo.k_pad);
#pragma unroll
          for (int q = 0; q < kFiltersPerThread / 4; ++q) {
            const float4 f = wv[q];
#pragma unroll
            for (int i = 0; i < PIX; ++i) {
              acc[i][4 * q] += v[i][c] * f.x;
              acc[i][4 * q + 1] += v[i][c] * f.y;
              acc[i][4 * q + 2] += v[i][c] * f.z;
              acc[i][4 * q + 3] += v[i][c] * f.w;
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < PIX; ++i) {
      if (valid[i])
        store_filter_run<T, kVector>(y + static_cast<int64_t>(p0 + i) * geo.k + k0, acc[i], k0, geo);
    }
  }
}

// ---- weight gradient: partials[block][k_pad x taps_pad], then a fixed-order merge ----

// The weight gradient's float tiles: gy's and the patches', also holding the groups' sums at the end (at
// most 16 floats a thread).
__host__ __device__ inline int tile_floats(const Geometry& geo) {
  const int tiles = kTile * (geo.k_pad + geo.taps_pad);
  return tiles > kThreads * 16 ? tiles : kThreads * 16;
}

// A block's threads form groups of (k_pad/4) x (taps_pad/4) threads, each owning a 4x4 block of gw; the
// groups take the tile's pixels in turn, then their sums are added in group order. Staging a tile takes no
// per-element division: gy's rows are one contiguous run (K == k_pad), and a receptive field's kernel row is
// S * C contiguous values of x, copied by one thread per (pixel, kernel row).
template <class T, int C>
__global__ void __launch_bounds__(kThreads)
    few_channels_weight_partial_kernel(const T* __restrict__ x, const T* __restrict__ gy,
                                       float* __restrict__ partials, Geometry geo) {
  extern __shared__ float4 weight_shared[];
  float* gy_tile = reinterpret_cast<float*>(weight_shared);  // [kTile][k_pad]
  float* patch_tile = gy_tile + kTile * geo.k_pad;           // [kTile][taps_pad]
  // The padded taps [taps, taps_pad) stay zero; the real ones are rewritten for every tile.
  for (int e = threadIdx.x; e < kTile * geo.taps_pad; e += blockDim.x) patch_tile[e] = 0.0f;
  const int k_blocks = geo.k_pad / 4, tap_blocks = geo.taps_pad / 4;
  const int group_size = k_blocks * tap_blocks;
  const int groups = blockDim.x / group_size;
  const int group = threadIdx.x / group_size, member = threadIdx.x % group_size;
  const int kb = member / tap_blocks, jb = member % tap_blocks;
  const int row_taps = geo.s * C;
  float acc[4][4] = {};
  const int tiles = (geo.pixels + kTile - 1) / kTile;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int p0 = tile * kTile;
    const int valid = min(kTile, geo.pixels - p0);
    __syncthreads();  // the previous tile's reads are done (and, the first time, the zeroing)
    if (geo.k == geo.k_pad) {
      const T* src = gy + static_cast<int64_t>(p0) * geo.k;
      const int n = valid * geo.k;
      for (int e = threadIdx.x; e < kTile * geo.k_pad; e += blockDim.x) {
        gy_tile[e] = e < n ? convert<float>(src[e]) : 0.0f;
      }
    } else {
      for (int e = threadIdx.x; e < kTile * geo.k_pad; e += blockDim.x) {
        const int i = e / geo.k_pad, k = e % geo.k_pad;
        gy_tile[e] =
            (i < valid && k < geo.k) ? convert<float>(gy[static_cast<int64_t>(p0 + i) * geo.k + k]) : 0.0f;
      }
    }
    // Consecutive threads take consecutive pixels of one kernel row: neighbouring reads of x.
    for (int item = threadIdx.x; item < kTile * geo.r; item += blockDim.x) {
      const int i = item % kTile, r = item / kTile;
      float* dst = patch_tile + i * geo.taps_pad + r * row_taps;
      bool row_inside = false;
      const T* src = x;
      int iw0 = 0;
      if (i < valid) {
        const Window win = window_of(p0 + i, geo);
        const int ih = win.ih0 + r * geo.dilation;
        row_inside = static_cast<unsigned>(ih) < static_cast<unsigned>(geo.h);
        src = x + static_cast<int64_t>(win.image_row0 + ih) * geo.w * C;
        iw0 = win.iw0;
      }
      for (int s = 0; s < geo.s; ++s) {
        const int iw = iw0 + s * geo.dilation;
        const bool inside = row_inside && static_cast<unsigned>(iw) < static_cast<unsigned>(geo.w);
#pragma unroll
        for (int c = 0; c < C; ++c) dst[s * C + c] = inside ? convert<float>(src[iw * C + c]) : 0.0f;
      }
    }
    __syncthreads();
    if (group < groups) {
      for (int i = group; i < kTile; i += groups) {
        const float4 a = reinterpret_cast<const float4*>(gy_tile + i * geo.k_pad)[kb];
        const float4 b = reinterpret_cast<const float4*>(patch_tile + i * geo.taps_pad)[jb];
        const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[u][v] += av[u] * bv[v];
        }
      }
    }
  }
  // Add the groups' sums in group order (the tile buffers are free now).
  __syncthreads();
  float* sums = gy_tile;  // [groups][group_size][16] fits: groups * group_size * 16 <= 256 * 16 floats
  if (group < groups) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
#pragma unroll
      for (int v = 0; v < 4; ++v) sums[(group * group_size + member) * 16 + u * 4 + v] = acc[u][v];
    }
  }
  __syncthreads();
  float* row = partials + static_cast<int64_t>(blockIdx.x) * geo.k_pad * geo.taps_pad;
  for (int e = threadIdx.x; e < group_size * 16; e += blockDim.x) {
    const int m = e / 16, u = (e % 16) / 4, v = e % 4;
    float total = 0.0f;
    for (int q = 0; q < groups; ++q) total += sums[(q * group_size + m) * 16 + u * 4 + v];
    const int k = (m / tap_blocks) * 4 + u, j = (m % tap_blocks) * 4 + v;
    row[k * geo.taps_pad + j] = total;
  }
}

// gw[k][j] = the blocks' partials added in block order.
template <class T>
__global__ void few_channels_weight_merge_kernel(const float* __restrict__ partials, T* __restrict__ gw,
                                                 int blocks, Geometry geo) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= geo.k * geo.taps) return;
  const int k = e / geo.taps, j = e % geo.taps;
  const int64_t row_size = static_cast<int64_t>(geo.k_pad) * geo.taps_pad;
  float total = 0.0f;
  for (int b = 0; b < blocks; ++b) total += partials[b * row_size + k * geo.taps_pad + j];
  gw[e] = convert<T>(total);
}

// Calls fn(T{}) for the half and single dtypes these kernels take.
template <class Fn>
void dispatch_few(DType dtype, Fn&& fn) {
  dispatch_device_float(dtype, "conv2d (few channels)", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      throw DTypeError("conv2d (few channels): internal: f64 has no few-channel kernel");
    } else {
      fn(T{});
    }
  });
}

template <class Fn>
void with_channels(int c, Fn&& fn) {
  switch (c) {
    case 1:
      fn(std::integral_constant<int, 1>{});
      break;
    case 2:
      fn(std::integral_constant<int, 2>{});
      break;
    case 3:
      fn(std::integral_constant<int, 3>{});
      break;
    default:
      fn(std::integral_constant<int, 4>{});
      break;
  }
}

}  // namespace

int64_t few_channel_executions() {
  return executions().load(std::memory_order_relaxed);
}

namespace few_channels {

namespace {
// The shapes the kernels take: channels-last, groups 1, few channels, filters and taps, 32-bit indexing.
bool fits(const Conv2dShape& g, DType dtype) {
  if (!g.channels_last || g.groups != 1 || g.c > kMaxChannels || g.k > kMaxFilters) return false;
  if (g.c * g.r * g.s > kMaxTaps) return false;
  if (g.n * g.c * g.h * g.w > kMaxElements || g.n * g.k * g.oh * g.ow > kMaxElements) return false;
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

// auto: the own forward up to 32 filters, the own weight gradient up to 16, as measured on whole training
// steps (H100, graphs captured). The strided CNN's 3->16 stem at 512 px ran 8.6% (f32) and 30% (bf16) faster
// with both than with cuDNN's (session 26). MobileNetV2's 3->32 (b128) with the own forward: +0.45% in
// bf16, level in f32 (session 30). ResNet-18's 3->64 CIFAR stem: the four-pixel forward took 117.9 us
// against cuDNN's 164.4 at b512 (ncu), yet its steps ran 0.25-0.45% slower in f32 and bf16 (session 30),
// and the own weight gradient lost outright (219.6 against 157.5 us, session 29). "forward" runs the own
// forward alone at any filter count, so the two directions can be measured apart.
std::string setting() {
  return config::get_string(config::Knob::few_channel_conv).value_or("auto");
}
}  // namespace

bool applies(const Conv2dShape& g, DType dtype) {
  if (!fits(g, dtype)) return false;
  const std::string way = setting();
  if (way == "auto") return g.k <= kAutoMaxForwardFilters;
  return way == "own" || way == "forward";
}

bool applies_to_weight_gradient(const Conv2dShape& g, DType dtype) {
  if (!fits(g, dtype)) return false;
  const std::string way = setting();
  if (way == "auto") return g.k <= kAutoMaxWeightGradientFilters;
  return way == "own";
}

void forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dShape& g) {
  const int device = x.device().index;
  const Geometry geo = geometry_of(g, kFiltersPerThread);
  // One pixel an item up to 16 filters; four beyond, where a pixel's tap feeds several 16-filter chunks:
  // for ResNet-18's 3->64 stem at b512 on an H100 one pixel an item took 253.6 us (session 29), four 117.9
  // (session 30).
  const bool wide = geo.k_pad > kFiltersPerThread;
  const int pixels_per_item = wide ? kWidePixels : 1;
  const int64_t items =
      (int64_t{geo.pixels} + pixels_per_item - 1) / pixels_per_item * (geo.k_pad / kFiltersPerThread);
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((items + kThreads - 1) / kThreads, kForwardBlocks));
  const size_t shared = sizeof(float) * geo.taps * geo.k_pad;
  dispatch_few(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto* xp = static_cast<const T*>(x.raw_data());
    const auto* wp = static_cast<const T*>(w.raw_data());
    auto* yp = static_cast<T*>(y.raw_data());
    // Whole 16-filter runs at 16-byte aligned addresses: K a multiple of 16 and y aligned.
    const bool vector = geo.k % kFiltersPerThread == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    with_channels(geo.c, [&](auto channels) {
      constexpr int C = decltype(channels)::value;
      const auto launch = [&](auto kernel) {
        kernel<<<blocks, kThreads, shared, compute_stream(device)>>>(xp, wp, yp, geo);
      };
      if (vector) {
        wide ? launch(few_channels_forward_wide_kernel<T, C, true, kWidePixels>)
             : launch(few_channels_forward_kernel<T, C, true>);
      } else {
        wide ? launch(few_channels_forward_wide_kernel<T, C, false, kWidePixels>)
             : launch(few_channels_forward_kernel<T, C, false>);
      }
    });
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

void backward_weight(const Tensor& x, const Tensor& gy, const Tensor& gw, const Conv2dShape& g) {
  const int device = gy.device().index;
  const Geometry geo = geometry_of(g, 4);
  const int tiles = (geo.pixels + kTile - 1) / kTile;
  const int blocks = std::min(tiles, kWeightBlocks);
  const int64_t row_size = int64_t{geo.k_pad} * geo.taps_pad;
  const size_t shared = sizeof(float) * tile_floats(geo);
  const Tensor partials = Tensor::empty({blocks * row_size}, DType::f32, gy.device());
  dispatch_few(gy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    float* pp = static_cast<float*>(partials.raw_data());
    with_channels(geo.c, [&](auto channels) {
      constexpr int C = decltype(channels)::value;
      few_channels_weight_partial_kernel<T, C><<<blocks, kThreads, shared, compute_stream(device)>>>(
          static_cast<const T*>(x.raw_data()), static_cast<const T*>(gy.raw_data()), pp, geo);
    });
    LIFTOFF_LAUNCH_CHECK();
    const int outputs = geo.k * geo.taps;
    few_channels_weight_merge_kernel<T>
        <<<(outputs + kThreads - 1) / kThreads, kThreads, 0, compute_stream(device)>>>(
            pp, static_cast<T*>(gw.raw_data()), blocks, geo);
    LIFTOFF_LAUNCH_CHECK();
  });
  executions().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace few_channels
}  // namespace liftoff::cuda
