// Batch norm of a small channels-last activation, one launch a pass: a block owns a tile of VEC channels and
// every row of it, and keeps the rows in registers (rows <= kResidentThreads * PASSES). The forward takes the
// statistics, finalizes them and normalizes (with the fused epilogue) in one kernel, or takes the statistics
// alone when the normalize pass is deferred (ops/batch_norm2d/fusion.h); the backward takes the gradient
// sums, finalizes them and writes the input gradient in one kernel. No partials, no arrival
// counters, no second launch: on MobileNetV2's 2 x 2 and 4 x 4 layers the split kernels' floor (statistics
// ~10 us + normalize ~4.5 us, gradient sums 10-15 us + input gradient ~5 us, session 17) is mostly latency,
// and 33 of its 52 batch norms are that small. Internal to ops/batch_norm2d: cuda.cu is the only includer.
#pragma once
#include <cstdint>

#include "ops/batch_norm2d/cuda_nhwc_kernels.cuh"

namespace liftoff::cuda {
namespace {  // NOLINT: included by one translation unit

constexpr int kResidentThreads = 512;
// Rows a thread holds: 4 x 16 bytes per tensor (the backward holds three tensors: 48 registers).
constexpr int kResidentMaxPasses = 4;
constexpr int64_t kResidentMaxRows = static_cast<int64_t>(kResidentThreads) * kResidentMaxPasses;

// Adds each of the N values over the block's threads (all of them hold the same channels); every thread gets
// the totals. Warp shuffles, then the warps' values in warp order from shared memory: deterministic.
template <class A, int N>
__device__ __forceinline__ void resident_block_sum(A (&v)[N], A* scratch /* [warps * N] */) {
  constexpr int warps = kResidentThreads / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v[j] += __shfl_down_sync(0xffffffffu, v[j], offset);
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < N; ++j) scratch[warp * N + j] = v[j];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    A total = 0;
#pragma unroll
    for (int w = 0; w < warps; ++w) total += scratch[w * N + j];
    v[j] = total;
  }
  __syncthreads();  // the scratch may be reused
}

// Training forward: statistics (two passes over the registers: the mean, then the squared deviations),
// finalize (saved mean/invstd, running statistics, batches_tracked), then y = bn(x) (+ residual) (ReLU capped
// at cap), unless y is null (the statistics alone). Grid: C / VEC blocks of kResidentThreads; thread t holds
// rows t, t + kResidentThreads, ...
template <class T, class A, class W, int VEC, int PASSES>
__global__ void __launch_bounds__(kResidentThreads)
    forward_resident_nhwc_kernel(const T* x, int64_t channels, int64_t rows, const W* weight, const W* bias,
                                 StatsFinalize<A, W> finalize, const T* residual, bool relu, A cap, T* y) {
  __shared__ A scratch[(kResidentThreads / 32) * VEC];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * VEC;
  Packet<T, VEC> v[PASSES];
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const int64_t r = threadIdx.x + static_cast<int64_t>(p) * kResidentThreads;
    if (r < rows) v[p] = load_packet<T, VEC>(x + r * channels + c0);
  }
  A mean[VEC], m2[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) mean[j] = m2[j] = A(0);
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    if (threadIdx.x + static_cast<int64_t>(p) * kResidentThreads < rows) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) mean[j] += convert<A>(v[p].v[j]);
    }
  }
  resident_block_sum<A, VEC>(mean, scratch);
#pragma unroll
  for (int j = 0; j < VEC; ++j) mean[j] /= finalize.count;
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    if (threadIdx.x + static_cast<int64_t>(p) * kResidentThreads < rows) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A d = convert<A>(v[p].v[j]) - mean[j];
        m2[j] += d * d;
      }
    }
  }
  resident_block_sum<A, VEC>(m2, scratch);
  // Thread j < VEC finalizes channel c0 + j (one call site: eight inlined copies cost registers).
  const int t = static_cast<int>(threadIdx.x);
  if (t < VEC) {
    A my_mean = 0, my_m2 = 0;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (t == j) {
        my_mean = mean[j];
        my_m2 = m2[j];
      }
    }
    finalize.finish(my_mean, my_m2, c0 + t, finalize.load_running(c0 + t));
  }
  if (y == nullptr) return;
    // mean and m2 become the normalize's shift and scale (in place: registers are tight at 8 x 4 rows).
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    A scale, shift;
    bn_scale_shift(convert<A>(weight[c0 + j]), convert<A>(bias[c0 + j]), mean[j],
                   rsqrt_acc(m2[j] / finalize.count + finalize.eps), scale, shift);
    m2[j] = scale;
    mean[j] = shift;
  }
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const int64_t r = threadIdx.x + static_cast<int64_t>(p) * kResidentThreads;
    if (r >= rows) continue;
    const int64_t i = r * channels + c0;
    A out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = bn_affine(convert<A>(v[p].v[j]), m2[j], mean[j]);
    store_with_epilogue<T, A, VEC>(out, residual, relu, cap, y, i);
  }
}

// Backward: sums of g and g * (x - mean) (g = gy masked by the fused ReLU's output when there is one),
// finalize (weight and bias gradients), then gx = k1 * (g - k2 - (x - mean) * k3) and the residual's
// gradient g. Grid as the forward's.
template <class T, class A, class W, int VEC, int PASSES>
__global__ void __launch_bounds__(kResidentThreads)
    backward_resident_nhwc_kernel(const T* x, const T* gy, const T* y_relu, A cap, const A* mean,
                                  int64_t channels, int64_t rows, GradFinalize<A, W> finalize, T* gx,
                                  T* g_residual) {
  __shared__ A scratch[(kResidentThreads / 32) * 2 * VEC];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * VEC;
  const bool masked = y_relu != nullptr;
  A m[VEC], invstd[VEC], w[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    m[j] = mean[c0 + j];
    const typename GradFinalize<A, W>::Inputs in = finalize.load_inputs(c0 + j);
    invstd[j] = in.invstd;
    w[j] = in.weight;
  }
  Packet<T, VEC> g[PASSES], xv[PASSES];
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const int64_t r = threadIdx.x + static_cast<int64_t>(p) * kResidentThreads;
    if (r >= rows) continue;
    const int64_t i = r * channels + c0;
    g[p] = load_packet<T, VEC>(gy + i);
    xv[p] = load_packet<T, VEC>(x + i);
    if (masked) {
      const Packet<T, VEC> yv = load_packet<T, VEC>(y_relu + i);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        if (!relu_passes(convert<A>(yv.v[j]), cap)) g[p].v[j] = convert<T>(A(0));  // as masked_grad
      }
    }
  }
  A sums[2 * VEC];  // [0, VEC): sum of g; [VEC, 2 VEC): sum of g * (x - mean)
#pragma unroll
  for (int j = 0; j < 2 * VEC; ++j) sums[j] = A(0);
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    if (threadIdx.x + static_cast<int64_t>(p) * kResidentThreads < rows) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A gj = convert<A>(g[p].v[j]);
        sums[j] += gj;
        sums[VEC + j] += gj * (convert<A>(xv[p].v[j]) - m[j]);
      }
    }
  }
  resident_block_sum<A, 2 * VEC>(sums, scratch);
  A k1[VEC], k2[VEC], k3[VEC];
  const int t = static_cast<int>(threadIdx.x);
  if (t < VEC) {
    A my_dy = 0, my_dy_xmu = 0;
    typename GradFinalize<A, W>::Inputs in;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (t == j) {
        my_dy = sums[j];
        my_dy_xmu = sums[VEC + j];
        in = {invstd[j], w[j]};
      }
    }
    finalize.finish(my_dy, my_dy_xmu, c0 + t, in);
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    // The coefficients finish() stores for the two-kernel path, computed here from the same sums.
    k1[j] = w[j] * invstd[j];
    k2[j] = finalize.training ? sums[j] / finalize.count : A(0);
    k3[j] = finalize.training ? invstd[j] * invstd[j] * sums[VEC + j] / finalize.count : A(0);
  }
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const int64_t r = threadIdx.x + static_cast<int64_t>(p) * kResidentThreads;
    if (r >= rows) continue;
    const int64_t i = r * channels + c0;
    A gj[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) gj[j] = convert<A>(g[p].v[j]);
    if (g_residual != nullptr) store_vec<T, A, VEC>(g_residual + i, gj);
    if (gx != nullptr) {
      A out[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        out[j] = k1[j] * (gj[j] - k2[j] - (convert<A>(xv[p].v[j]) - m[j]) * k3[j]);
      store_vec<T, A, VEC>(gx + i, out);
    }
  }
}

}  // namespace
}  // namespace liftoff::cuda
