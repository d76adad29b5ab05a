// The batch-norm CUDA kernels: per-channel moments (split over blocks, merged by the last block), the
// normalize pass and the gradient passes, for NCHW and channels-last (scalar and 16-byte vectorised), with
// the fused residual add + ReLU epilogue. Internal to ops/batch_norm2d: cuda.cu (the launches) is its only
// includer, so the kernels keep internal linkage.
#pragma once
#include <cstdint>

#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {
namespace {  // NOLINT: included by one translation unit
constexpr int kReduceBlock = 256;
constexpr int kFinalizeBlock = 128;

__device__ __forceinline__ float rsqrt_acc(float v) {
  return rsqrtf(v);
}
__device__ __forceinline__ double rsqrt_acc(double v) {
  return rsqrt(v);
}

// The fused activation: ReLU, capped at `cap` (6 for ReLU6; infinity for a plain ReLU). NaN becomes 0, as
// the unfused epilogue always did.
template <class A>
__device__ __forceinline__ A relu_capped(A v, A cap) {
  v = v > A(0) ? v : A(0);
  return v < cap ? v : cap;
}

// Whether the activation passed the gradient, judged from its output: 0 < y < cap (hardtanh's rule, so 0 at
// both kinks); with no cap every positive y passes, +inf included.
template <class A>
__device__ __forceinline__ bool relu_passes(A y, A cap) {
  return y > A(0) && (y < cap || isinf(cap));
}

// The normalize's affine map y = x * scale + shift, scale = weight * invstd, shift = bias - mean * scale, as
// explicit FMAs: the backward that recomputes the fused ReLU's mask from x (MaskFromX) gets the forward's
// pre-activation bit for bit.
template <class A>
__device__ __forceinline__ void bn_scale_shift(A weight, A bias, A mean, A invstd, A& scale, A& shift) {
  scale = weight * invstd;
  shift = fma(-mean, scale, bias);
}
template <class A>
__device__ __forceinline__ A bn_affine(A x, A scale, A shift) {
  return fma(x, scale, shift);
}

// Where no residual was added, the fused ReLU's mask comes from x instead of the stored output y: the
// pre-activation bn_affine(x), capped and rounded to T as the forward stored it, then relu_passes. The same
// mask bit for bit, one tensor fewer read by each backward pass. bias == nullptr: read y.
template <class A, class W>
struct MaskFromX {
  const W* weight = nullptr;
  const W* bias = nullptr;
  const A* invstd = nullptr;
  __device__ bool on() const { return bias != nullptr; }
  // Channel c's scale and shift (the normalize's).
  __device__ void load(int64_t c, const A* mean, A& scale, A& shift) const {
    bn_scale_shift(convert<A>(weight[c]), convert<A>(bias[c]), mean[c], invstd[c], scale, shift);
  }
  template <class T>
  __device__ static bool passes(A x, A scale, A shift, A cap) {
    return relu_passes(convert<A>(convert<T>(relu_capped(bn_affine(x, scale, shift), cap))), cap);
  }
};

// Chan et al.'s merge of (count, mean, M2) moments; b is folded into a.
template <class A>
__device__ __forceinline__ void merge_moments(A& n, A& mean, A& m2, A nb, A mean_b, A m2b) {
  if (nb == A(0)) return;
  if (n == A(0)) {
    n = nb;
    mean = mean_b;
    m2 = m2b;
    return;
  }
  const A total = n + nb;
  const A delta = mean_b - mean;
  const A fraction_b = nb / total;
  mean += delta * fraction_b;
  m2 += m2b + delta * delta * n * fraction_b;
  n = total;
}

// Walks the flattened (sample, pixel) positions of one channel with a fixed stride and no per-step division.
struct ChannelWalk {
  int64_t sample, pixel, step_samples, step_pixels, hw;
  __device__ ChannelWalk(int64_t start, int64_t stride, int64_t hw_) : hw(hw_) {
    sample = start / hw;
    pixel = start - sample * hw;
    step_samples = stride / hw;
    step_pixels = stride - step_samples * hw;
  }
  __device__ __forceinline__ int64_t offset(int64_t channels, int64_t c) const {
    return (sample * channels + c) * hw + pixel;
  }
  __device__ __forceinline__ void advance() {
    pixel += step_pixels;
    sample += step_samples;
    if (pixel >= hw) {
      pixel -= hw;
      ++sample;
    }
  }
};

// The last of channel c's blocks to finish (each block's thread 0 calls this after writing its partial)
// gets true and resets the channel's counter for the next launch; its thread 0 then merges the partials in
// split order (deterministic). One launch instead of a partial and a finalize kernel: at batch 16 a step is
// a few hundred tiny kernels, and each launch costs more than the work of a finalize.
__device__ __forceinline__ bool last_block_of_channel(unsigned* done, int64_t c) {
  __threadfence();  // this block's partial is visible before the count says so
  const unsigned finished = atomicAdd(&done[c], 1u) + 1u;
  if (finished < gridDim.x) return false;
  done[c] = 0u;
  __threadfence();  // and the other blocks' partials are read after
  return true;
}

// Per channel: what the forward's finalize computes (saved mean/invstd, running statistics).
template <class A, class W>
struct StatsFinalize {
  A count, eps, momentum;
  W* running_mean;
  W* running_var;
  A* save_mean;
  A* save_invstd;
  int64_t* batches_tracked;  // incremented once per training forward, or null
  __device__ void operator()(const A* channel_partials, int splits, int64_t c) const {
    A n = 0, mean = 0, m2 = 0;
    for (int s = 0; s < splits; ++s) {
      const volatile A* p = channel_partials + s * 3;
      merge_moments(n, mean, m2, p[0], p[1], p[2]);
    }
    finish(mean, m2, c, load_running(c));
  }
  // Channel c's running statistics as stored (zeros without them). The channels-last kernels' merging block
  // loads them before it merges, so their round trip overlaps the merge's.
  struct Running {
    A mean = 0, var = 0;
  };
  __device__ Running load_running(int64_t c) const {
    if (running_mean == nullptr) return {};
    return {convert<A>(running_mean[c]), convert<A>(running_var[c])};
  }
  // Channel c's merged moments (mean, M2 over all `count` values) and its running statistics as loaded.
  __device__ void finish(A mean, A m2, int64_t c, Running old) const {
    const A var = m2 / count;  // biased, for normalization
    save_mean[c] = mean;
    save_invstd[c] = rsqrt_acc(var + eps);
    // Here rather than as a kernel of its own: one graph node less per batch-norm layer and micro-batch.
    if (batches_tracked != nullptr && c == 0) *batches_tracked += 1;
    if (running_mean != nullptr) {
      running_mean[c] = convert<W>((A(1) - momentum) * old.mean + momentum * mean);
      running_var[c] = convert<W>((A(1) - momentum) * old.var + momentum * (m2 / (count - A(1))));
    }
  }
};

// Block (s, c) reduces positions [s * chunk, (s + 1) * chunk) of channel c to (count, mean, M2); the last
// block of the channel finalizes.
template <class T, class A, class W>
__global__ void stats_partial_kernel(const T* x, int64_t channels, int64_t hw, int64_t count, int64_t chunk,
                                     A* partial, unsigned* done, StatsFinalize<A, W> finalize) {
  const int64_t c = blockIdx.y;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(count, begin + chunk);
  // Sums are taken relative to a value of the channel, which keeps sum-of-squares cancellation small.
  const A shift = convert<A>(x[c * hw]);
  A sum = 0, sumsq = 0;
  int64_t mine = 0;
  ChannelWalk walk(begin + threadIdx.x, blockDim.x, hw);
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x, ++mine) {
    const A v = convert<A>(x[walk.offset(channels, c)]) - shift;
    sum += v;
    sumsq += v * v;
    walk.advance();
  }
  A n = static_cast<A>(mine);
  A mean = mine ? sum / n : A(0);
  A m2 = mine ? max(A(0), sumsq - sum * mean) : A(0);
  for (int offset = 16; offset > 0; offset /= 2) {
    const A nb = __shfl_down_sync(0xffffffffu, n, offset);
    const A mb = __shfl_down_sync(0xffffffffu, mean, offset);
    const A m2b = __shfl_down_sync(0xffffffffu, m2, offset);
    if ((threadIdx.x % 32) + offset < 32) merge_moments(n, mean, m2, nb, mb, m2b);
  }
  __shared__ A warp_n[32], warp_mean[32], warp_m2[32];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    warp_n[warp] = n;
    warp_mean[warp] = mean;
    warp_m2[warp] = m2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    A tn = 0, tmean = 0, tm2 = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
      merge_moments(tn, tmean, tm2, warp_n[w], warp_mean[w], warp_m2[w]);
    A* out = partial + (c * gridDim.x + blockIdx.x) * 3;
    out[0] = tn;
    out[1] = tmean + shift;
    out[2] = tm2;
    if (last_block_of_channel(done, c)) finalize(partial + c * gridDim.x * 3, static_cast<int>(gridDim.x), c);
  }
}

template <class A, class W>
__global__ void running_stats_kernel(const W* running_mean, const W* running_var, int64_t channels, A eps,
                                     A* save_mean, A* save_invstd) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  save_mean[c] = convert<A>(running_mean[c]);
  save_invstd[c] = rsqrt_acc(convert<A>(running_var[c]) + eps);
}

// Grid: x = sample * channels + channel (one plane), y = pixel blocks; one modulo per block, not per element.
template <class T, class W, class A>
__global__ void normalize_kernel(const T* x, const A* mean, const A* invstd, const W* weight, const W* bias,
                                 int64_t channels, int64_t hw, const T* residual, bool relu, A cap, T* y) {
  const int64_t plane = blockIdx.x;
  const int64_t c = plane % channels;
  A scale, shift;
  bn_scale_shift(convert<A>(weight[c]), convert<A>(bias[c]), mean[c], invstd[c], scale, shift);
  const T* src = x + plane * hw;
  const T* res = residual != nullptr ? residual + plane * hw : nullptr;
  T* dst = y + plane * hw;
  for (int64_t k = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < hw;
       k += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    A v = bn_affine(convert<A>(src[k]), scale, shift);
    if (res != nullptr) v += convert<A>(res[k]);
    if (relu) v = relu_capped(v, cap);
    dst[k] = convert<T>(v);
  }
}

// The gradient reaching the batch norm: gy, or gy where the fused ReLU passed (its output 0 < y < cap).
template <class T, class A>
__device__ __forceinline__ A masked_grad(const T* gy, const T* y_relu, A cap, int64_t i) {
  const A g = convert<A>(gy[i]);
  return y_relu != nullptr && !relu_passes(convert<A>(y_relu[i]), cap) ? A(0) : g;
}

// Per channel: grad_weight, grad_bias, and gx = k1 * (gy - k2 - (x - mean) * k3) coefficients.
template <class A, class W>
struct GradFinalize {
  A count;
  const A* invstd;
  const W* weight;
  bool training;
  W* grad_weight;
  W* grad_bias;
  A* coeff;
  __device__ void operator()(const A* channel_partials, int splits, int64_t c) const {
    A sum_dy = 0, sum_dy_xmu = 0;
    for (int s = 0; s < splits; ++s) {
      const volatile A* p = channel_partials + s * 2;
      sum_dy += p[0];
      sum_dy_xmu += p[1];
    }
    finish(sum_dy, sum_dy_xmu, c, load_inputs(c));
  }
  // Channel c's invstd and weight. The channels-last kernel's merging block loads them before it merges, so
  // their round trip overlaps the merge's.
  struct Inputs {
    A invstd = 0, weight = 0;
  };
  __device__ Inputs load_inputs(int64_t c) const { return {invstd[c], convert<A>(weight[c])}; }
  __device__ void finish(A sum_dy, A sum_dy_xmu, int64_t c, Inputs in) const {
    const A is = in.invstd;
    if (grad_weight != nullptr) grad_weight[c] = convert<W>(sum_dy_xmu * is);
    if (grad_bias != nullptr) grad_bias[c] = convert<W>(sum_dy);
    coeff[c * 3] = in.weight * is;
    coeff[c * 3 + 1] = training ? sum_dy / count : A(0);
    coeff[c * 3 + 2] = training ? is * is * sum_dy_xmu / count : A(0);
  }
};

// Block (s, c): sums of gy and gy * (x - mean) over its positions of channel c; the last block of the
// channel finalizes.
template <class T, class A, class W>
__global__ void grad_partial_kernel(const T* x, const T* gy, const T* y_relu, A cap, const A* mean,
                                    int64_t channels, int64_t hw, int64_t count, int64_t chunk, A* partial,
                                    unsigned* done, GradFinalize<A, W> finalize) {
  const int64_t c = blockIdx.y;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(count, begin + chunk);
  const A m = mean[c];
  A sum_dy = 0, sum_dy_xmu = 0;
  ChannelWalk walk(begin + threadIdx.x, blockDim.x, hw);
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const int64_t i = walk.offset(channels, c);
    const A g = masked_grad<T, A>(gy, y_relu, cap, i);
    sum_dy += g;
    sum_dy_xmu += g * (convert<A>(x[i]) - m);
    walk.advance();
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum_dy += __shfl_down_sync(0xffffffffu, sum_dy, offset);
    sum_dy_xmu += __shfl_down_sync(0xffffffffu, sum_dy_xmu, offset);
  }
  __shared__ A warp_dy[32], warp_dy_xmu[32];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    warp_dy[warp] = sum_dy;
    warp_dy_xmu[warp] = sum_dy_xmu;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    A a = 0, b = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      a += warp_dy[w];
      b += warp_dy_xmu[w];
    }
    A* out = partial + (c * gridDim.x + blockIdx.x) * 2;
    out[0] = a;
    out[1] = b;
    if (last_block_of_channel(done, c)) finalize(partial + c * gridDim.x * 2, static_cast<int>(gridDim.x), c);
  }
}

template <class T, class A>
__global__ void grad_input_kernel(const T* x, const T* gy, const T* y_relu, A cap, const A* mean,
                                  const A* coeff, int64_t channels, int64_t hw, T* gx, T* g_residual) {
  const int64_t plane = blockIdx.x;
  const int64_t c = plane % channels;
  const A m = mean[c], k1 = coeff[c * 3], k2 = coeff[c * 3 + 1], k3 = coeff[c * 3 + 2];
  const int64_t base = plane * hw;
  for (int64_t k = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < hw;
       k += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const A g = masked_grad<T, A>(gy, y_relu, cap, base + k);
    if (g_residual != nullptr) g_residual[base + k] = convert<T>(g);
    if (gx != nullptr) gx[base + k] = convert<T>(k1 * (g - k2 - (convert<A>(x[base + k]) - m) * k3));
  }
}

}  // namespace
}  // namespace liftoff::cuda
