// The batch-norm CUDA kernels: per-channel moments (split over blocks, merged by the last block), the
// normalize pass and the gradient passes, for NCHW and channels-last (scalar and 16-byte vectorised), with the
// fused residual add + ReLU epilogue. Internal to ops/batch_norm2d: cuda.cu (the launches) is its only includer,
// so the kernels keep internal linkage.
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
    finish(mean, m2, c);
  }
  // Channel c's merged moments (mean, M2 over all `count` values).
  __device__ void finish(A mean, A m2, int64_t c) const {
    const A var = m2 / count;  // biased, for normalization
    save_mean[c] = mean;
    save_invstd[c] = rsqrt_acc(var + eps);
    // Here rather than as a kernel of its own: one graph node less per batch-norm layer and micro-batch.
    if (batches_tracked != nullptr && c == 0) *batches_tracked += 1;
    if (running_mean != nullptr) {
      running_mean[c] = convert<W>((A(1) - momentum) * convert<A>(running_mean[c]) + momentum * mean);
      running_var[c] =
          convert<W>((A(1) - momentum) * convert<A>(running_var[c]) + momentum * (m2 / (count - A(1))));
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
                                 int64_t channels, int64_t hw, const T* residual, bool relu, T* y) {
  const int64_t plane = blockIdx.x;
  const int64_t c = plane % channels;
  const A scale = convert<A>(weight[c]) * invstd[c];
  const A shift = convert<A>(bias[c]) - mean[c] * scale;
  const T* src = x + plane * hw;
  const T* res = residual != nullptr ? residual + plane * hw : nullptr;
  T* dst = y + plane * hw;
  for (int64_t k = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < hw;
       k += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    A v = convert<A>(src[k]) * scale + shift;
    if (res != nullptr) v += convert<A>(res[k]);
    if (relu) v = v > A(0) ? v : A(0);
    dst[k] = convert<T>(v);
  }
}

// The gradient reaching the batch norm: gy, or gy where the fused ReLU passed (its output y > 0).
template <class T, class A>
__device__ __forceinline__ A masked_grad(const T* gy, const T* y_relu, int64_t i) {
  const A g = convert<A>(gy[i]);
  return y_relu != nullptr && !(convert<A>(y_relu[i]) > A(0)) ? A(0) : g;
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
    finish(sum_dy, sum_dy_xmu, c);
  }
  __device__ void finish(A sum_dy, A sum_dy_xmu, int64_t c) const {
    const A is = invstd[c];
    if (grad_weight != nullptr) grad_weight[c] = convert<W>(sum_dy_xmu * is);
    if (grad_bias != nullptr) grad_bias[c] = convert<W>(sum_dy);
    coeff[c * 3] = convert<A>(weight[c]) * is;
    coeff[c * 3 + 1] = training ? sum_dy / count : A(0);
    coeff[c * 3 + 2] = training ? is * is * sum_dy_xmu / count : A(0);
  }
};

// Block (s, c): sums of gy and gy * (x - mean) over its positions of channel c; the last block of the
// channel finalizes.
template <class T, class A, class W>
__global__ void grad_partial_kernel(const T* x, const T* gy, const T* y_relu, const A* mean, int64_t channels,
                                    int64_t hw, int64_t count, int64_t chunk, A* partial, unsigned* done,
                                    GradFinalize<A, W> finalize) {
  const int64_t c = blockIdx.y;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(count, begin + chunk);
  const A m = mean[c];
  A sum_dy = 0, sum_dy_xmu = 0;
  ChannelWalk walk(begin + threadIdx.x, blockDim.x, hw);
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const int64_t i = walk.offset(channels, c);
    const A g = masked_grad<T, A>(gy, y_relu, i);
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
__global__ void grad_input_kernel(const T* x, const T* gy, const T* y_relu, const A* mean, const A* coeff,
                                  int64_t channels, int64_t hw, T* gx, T* g_residual) {
  const int64_t plane = blockIdx.x;
  const int64_t c = plane % channels;
  const A m = mean[c], k1 = coeff[c * 3], k2 = coeff[c * 3 + 1], k3 = coeff[c * 3 + 2];
  const int64_t base = plane * hw;
  for (int64_t k = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < hw;
       k += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const A g = masked_grad<T, A>(gy, y_relu, base + k);
    if (g_residual != nullptr) g_residual[base + k] = convert<T>(g);
    if (gx != nullptr) gx[base + k] = convert<T>(k1 * (g - k2 - (convert<A>(x[base + k]) - m) * k3));
  }
}

// ---- channels-last (NHWC)
// ---------------------------------------------------------------------------------- x is [rows = N * H *
// W][C] in memory: a channel is a column. A block of kReduceBlock threads covers rows_per_pass = kReduceBlock
// / C rows per pass, thread t on channel t % C, so a warp reads consecutive elements (coalesced). Block s
// reduces rows [s * chunk, (s + 1) * chunk) to one partial per channel (its threads of a channel merged in
// thread order); the grid's last block merges each channel's partials in split order, split among
// rows_per_pass threads per channel and then in group order: deterministic, one launch.

// The grid's last block to finish gets true (one counter for the whole grid, reset by that block).
__device__ __forceinline__ bool last_block_of_grid(unsigned* done) {
  __shared__ bool last;
  __syncthreads();  // every thread's partial writes (each followed by its __threadfence) are done
  if (threadIdx.x == 0) {
    const unsigned finished = atomicAdd(done, 1u) + 1u;
    last = finished == gridDim.x;
    if (last) {
      *done = 0u;
      __threadfence();
    }
  }
  __syncthreads();
  return last;
}

// Thread t's moments (n, mean, M2) go to shared memory; thread c < C then merges those of its channel's
// threads (c, c + C, ...) in thread order into its own (n, mean, m2). s_* are kReduceBlock long.
template <class A>
__device__ __forceinline__ void merge_channel_threads(A* s_n, A* s_mean, A* s_m2, int64_t channels, A& n,
                                                      A& mean, A& m2) {
  const int t = threadIdx.x;
  const int used = static_cast<int>(kReduceBlock / channels * channels);
  s_n[t] = n;
  s_mean[t] = mean;
  s_m2[t] = m2;
  __syncthreads();
  if (t >= channels) return;
  n = 0, mean = 0, m2 = 0;
  for (int k = t; k < used; k += static_cast<int>(channels))
    merge_moments(n, mean, m2, s_n[k], s_mean[k], s_m2[k]);
}

// The same for two plain sums (the backward's sums of gy and gy * (x - mean)).
template <class A>
__device__ __forceinline__ void sum_channel_threads(A* s_a, A* s_b, int64_t channels, A& a, A& b) {
  const int t = threadIdx.x;
  const int used = static_cast<int>(kReduceBlock / channels * channels);
  s_a[t] = a;
  s_b[t] = b;
  __syncthreads();
  if (t >= channels) return;
  a = 0, b = 0;
  for (int k = t; k < used; k += static_cast<int>(channels)) {
    a += s_a[k];
    b += s_b[k];
  }
}

// The grid's last block: each channel's per-split partials (count, mean, M2) merged in split order. Group g
// of channel c (rows_per_pass = kReduceBlock / C threads per channel) merges splits g, g + rows_per_pass, ...
// in order; then thread c merges the groups in order. s_* are kReduceBlock-long shared scratch.
template <class A, class W>
__device__ void finish_stats_nhwc(const A* partial, int64_t channels, A* s_n, A* s_mean, A* s_m2,
                                  const StatsFinalize<A, W>& finalize) {
  const int t = threadIdx.x;
  const int rows_per_pass = static_cast<int>(kReduceBlock / channels);
  const int used = rows_per_pass * static_cast<int>(channels);
  const int64_t c = t % channels;
  A n = 0, mean = 0, m2 = 0;
  if (t < used) {
    const volatile A* p = partial + c * gridDim.x * 3;
    for (int64_t s = t / channels; s < gridDim.x; s += rows_per_pass)
      merge_moments(n, mean, m2, p[s * 3], p[s * 3 + 1], p[s * 3 + 2]);
  }
  __syncthreads();  // the shared arrays may still be read by the block's own reduction
  merge_channel_threads(s_n, s_mean, s_m2, channels, n, mean, m2);
  if (t < channels) finalize.finish(mean, m2, c);
}

// The same for the backward's partial sums of gy and gy * (x - mean).
template <class A, class W>
__device__ void finish_grad_nhwc(const A* partial, int64_t channels, A* s_dy, A* s_dy_xmu,
                                 const GradFinalize<A, W>& finalize) {
  const int t = threadIdx.x;
  const int rows_per_pass = static_cast<int>(kReduceBlock / channels);
  const int used = rows_per_pass * static_cast<int>(channels);
  const int64_t c = t % channels;
  A sum_dy = 0, sum_dy_xmu = 0;
  if (t < used) {
    const volatile A* p = partial + c * gridDim.x * 2;
    for (int64_t s = t / channels; s < gridDim.x; s += rows_per_pass) {
      sum_dy += p[s * 2];
      sum_dy_xmu += p[s * 2 + 1];
    }
  }
  __syncthreads();  // the shared arrays may still be read by the block's own reduction
  sum_channel_threads(s_dy, s_dy_xmu, channels, sum_dy, sum_dy_xmu);
  if (t < channels) finalize.finish(sum_dy, sum_dy_xmu, c);
}

template <class T, class A, class W>
__global__ void stats_partial_nhwc_kernel(const T* x, int64_t channels, int64_t rows, int64_t chunk,
                                          A* partial, unsigned* done, StatsFinalize<A, W> finalize) {
  __shared__ A s_n[kReduceBlock], s_mean[kReduceBlock], s_m2[kReduceBlock];
  const int t = threadIdx.x;
  const int rows_per_pass = static_cast<int>(kReduceBlock / channels);
  const int used = rows_per_pass * static_cast<int>(channels);
  const int64_t c = t % channels;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(rows, begin + chunk);
  // Shifted sums (by the channel's first value, as the NCHW kernel) keep sum-of-squares cancellation small.
  const A shift = convert<A>(x[c]);
  A n = 0, mean = 0, m2 = 0;
  if (t < used) {
    A sum = 0, sumsq = 0;
    int64_t mine = 0;
    for (int64_t r = begin + t / channels; r < end; r += rows_per_pass, ++mine) {
      const A v = convert<A>(x[r * channels + c]) - shift;
      sum += v;
      sumsq += v * v;
    }
    n = static_cast<A>(mine);
    mean = mine ? sum / n : A(0);
    m2 = mine ? max(A(0), sumsq - sum * mean) : A(0);
  }
  merge_channel_threads(s_n, s_mean, s_m2, channels, n, mean, m2);
  if (t < channels) {
    A* out = partial + (c * gridDim.x + blockIdx.x) * 3;
    out[0] = n;
    out[1] = mean + shift;
    out[2] = m2;
    __threadfence();
  }
  if (!last_block_of_grid(done)) return;
  finish_stats_nhwc(partial, channels, s_n, s_mean, s_m2, finalize);
}

// y = x * scale[c] + shift[c] (+ residual) (ReLU), over the storage; c = i % C.
template <class T, class W, class A>
__global__ void normalize_nhwc_kernel(const T* x, const A* mean, const A* invstd, const W* weight,
                                      const W* bias, int64_t channels, int64_t total, const T* residual,
                                      bool relu, T* y) {
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t c = i % channels;
    const A scale = convert<A>(weight[c]) * invstd[c];
    const A shift = convert<A>(bias[c]) - mean[c] * scale;
    A v = convert<A>(x[i]) * scale + shift;
    if (residual != nullptr) v += convert<A>(residual[i]);
    if (relu) v = v > A(0) ? v : A(0);
    y[i] = convert<T>(v);
  }
}

template <class T, class A, class W>
__global__ void grad_partial_nhwc_kernel(const T* x, const T* gy, const T* y_relu, const A* mean,
                                         int64_t channels, int64_t rows, int64_t chunk, A* partial,
                                         unsigned* done, GradFinalize<A, W> finalize) {
  __shared__ A s_dy[kReduceBlock], s_dy_xmu[kReduceBlock];
  const int t = threadIdx.x;
  const int rows_per_pass = static_cast<int>(kReduceBlock / channels);
  const int used = rows_per_pass * static_cast<int>(channels);
  const int64_t c = t % channels;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(rows, begin + chunk);
  A sum_dy = 0, sum_dy_xmu = 0;
  if (t < used) {
    const A m = mean[c];
    for (int64_t r = begin + t / channels; r < end; r += rows_per_pass) {
      const int64_t i = r * channels + c;
      const A g = masked_grad<T, A>(gy, y_relu, i);
      sum_dy += g;
      sum_dy_xmu += g * (convert<A>(x[i]) - m);
    }
  }
  sum_channel_threads(s_dy, s_dy_xmu, channels, sum_dy, sum_dy_xmu);
  if (t < channels) {
    A* out = partial + (c * gridDim.x + blockIdx.x) * 2;
    out[0] = sum_dy;
    out[1] = sum_dy_xmu;
    __threadfence();
  }
  if (!last_block_of_grid(done)) return;
  finish_grad_nhwc(partial, channels, s_dy, s_dy_xmu, finalize);
}

// Vectorized NHWC reductions: a thread loads 16 bytes (VEC values of consecutive channels) per row, so a
// warp reads whole 512-byte spans instead of 64; lanes = C / VEC threads cover a row, kReduceBlock / lanes
// rows per pass. Per block, the sums of every thread of a channel are added in a fixed tree order (shifted
// by the channel's first value for the statistics), one partial per block and channel; the grid's last
// block merges them as the scalar kernels do. Used when C / VEC is a power of two dividing kReduceBlock and
// the data is 16-byte aligned (nhwc_vectorizable).
template <class T>
constexpr int kNhwcVec = static_cast<int>(16 / sizeof(T));

template <class T, class A, int VEC>
__device__ __forceinline__ void load_vec(const T* p, A (&out)[VEC]) {
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  const T* v = reinterpret_cast<const T*>(&packed);
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = convert<A>(v[j]);
}

// Adds the per-thread values a[t * VEC + j] (and b) over the rows of the block into row 0's threads; the
// pairing is fixed, so the result is deterministic. rows_per_pass is a power of two.
template <class A, int VEC>
__device__ __forceinline__ void tree_add_rows(A* a, A* b, int lanes, int rows_per_pass) {
  const int t = threadIdx.x;
  const int row = t / lanes;
  for (int half = rows_per_pass / 2; half > 0; half /= 2) {
    __syncthreads();
    if (row < half) {
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

template <class T, class A, class W, int VEC>
__global__ void stats_partial_nhwc_vec_kernel(const T* x, int64_t channels, int64_t rows, int64_t chunk,
                                              A* partial, unsigned* done, StatsFinalize<A, W> finalize) {
  __shared__ A s_sum[kReduceBlock * VEC], s_sumsq[kReduceBlock * VEC];
  const int t = threadIdx.x;
  const int lanes = static_cast<int>(channels / VEC);
  const int rows_per_pass = kReduceBlock / lanes;
  const int lane = t % lanes;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(rows, begin + chunk);
  A shift[VEC], sum[VEC], sumsq[VEC];
  load_vec<T, A, VEC>(x + lane * VEC, shift);  // row 0: shifted sums keep the cancellation small
#pragma unroll
  for (int j = 0; j < VEC; ++j) sum[j] = sumsq[j] = A(0);
  for (int64_t r = begin + t / lanes; r < end; r += rows_per_pass) {
    A v[VEC];
    load_vec<T, A, VEC>(x + r * channels + lane * VEC, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A d = v[j] - shift[j];
      sum[j] += d;
      sumsq[j] += d * d;
    }
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    s_sum[t * VEC + j] = sum[j];
    s_sumsq[t * VEC + j] = sumsq[j];
  }
  tree_add_rows<A, VEC>(s_sum, s_sumsq, lanes, rows_per_pass);
  if (t < lanes) {
    const A n = static_cast<A>(max(int64_t(0), end - begin));
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int64_t c = t * VEC + j;
      const A total = s_sum[t * VEC + j], total_sq = s_sumsq[t * VEC + j];
      const A mean = n > A(0) ? total / n : A(0);
      A* out = partial + (c * gridDim.x + blockIdx.x) * 3;
      out[0] = n;
      out[1] = mean + shift[j];
      out[2] = n > A(0) ? max(A(0), total_sq - total * mean) : A(0);
    }
    __threadfence();
  }
  if (!last_block_of_grid(done)) return;
  // The shared sums are free again: kReduceBlock-long scratch for the merge.
  finish_stats_nhwc(partial, channels, s_sum, s_sum + kReduceBlock, s_sumsq, finalize);
}

template <class T, class A, class W, int VEC>
__global__ void grad_partial_nhwc_vec_kernel(const T* x, const T* gy, const T* y_relu, const A* mean,
                                             int64_t channels, int64_t rows, int64_t chunk, A* partial,
                                             unsigned* done, GradFinalize<A, W> finalize) {
  __shared__ A s_dy[kReduceBlock * VEC], s_dy_xmu[kReduceBlock * VEC];
  const int t = threadIdx.x;
  const int lanes = static_cast<int>(channels / VEC);
  const int rows_per_pass = kReduceBlock / lanes;
  const int lane = t % lanes;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = min(rows, begin + chunk);
  A m[VEC], sum_dy[VEC], sum_dy_xmu[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    m[j] = mean[lane * VEC + j];
    sum_dy[j] = sum_dy_xmu[j] = A(0);
  }
  for (int64_t r = begin + t / lanes; r < end; r += rows_per_pass) {
    const int64_t i = r * channels + lane * VEC;
    A xv[VEC], g[VEC];
    load_vec<T, A, VEC>(x + i, xv);
    load_vec<T, A, VEC>(gy + i, g);
    if (y_relu != nullptr) {
      A yv[VEC];
      load_vec<T, A, VEC>(y_relu + i, yv);
#pragma unroll
      for (int j = 0; j < VEC; ++j) g[j] = yv[j] > A(0) ? g[j] : A(0);  // as masked_grad
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      sum_dy[j] += g[j];
      sum_dy_xmu[j] += g[j] * (xv[j] - m[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    s_dy[t * VEC + j] = sum_dy[j];
    s_dy_xmu[t * VEC + j] = sum_dy_xmu[j];
  }
  tree_add_rows<A, VEC>(s_dy, s_dy_xmu, lanes, rows_per_pass);
  if (t < lanes) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A* out = partial + ((t * VEC + j) * gridDim.x + blockIdx.x) * 2;
      out[0] = s_dy[t * VEC + j];
      out[1] = s_dy_xmu[t * VEC + j];
    }
    __threadfence();
  }
  if (!last_block_of_grid(done)) return;
  finish_grad_nhwc(partial, channels, s_dy, s_dy_xmu, finalize);
}

template <class T, class A, int VEC>
__device__ __forceinline__ void store_vec(T* p, const A (&v)[VEC]) {
  uint4 packed;
  T* out = reinterpret_cast<T*>(&packed);
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = convert<T>(v[j]);
  *reinterpret_cast<uint4*>(p) = packed;
}

// normalize_nhwc_kernel, VEC consecutive channels per thread (C % VEC == 0, 16-byte aligned data).
template <class T, class W, class A, int VEC>
__global__ void normalize_nhwc_vec_kernel(const T* x, const A* mean, const A* invstd, const W* weight,
                                          const W* bias, int64_t channels, int64_t vectors, const T* residual,
                                          bool relu, T* y) {
  LIFTOFF_GRID_STRIDE_LOOP(v, vectors) {
    const int64_t i = v * VEC;
    const int64_t c0 = i % channels;
    A xv[VEC], out[VEC];
    load_vec<T, A, VEC>(x + i, xv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A scale = convert<A>(weight[c0 + j]) * invstd[c0 + j];
      out[j] = xv[j] * scale + (convert<A>(bias[c0 + j]) - mean[c0 + j] * scale);
    }
    if (residual != nullptr) {
      A rv[VEC];
      load_vec<T, A, VEC>(residual + i, rv);
#pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] += rv[j];
    }
    if (relu) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] = out[j] > A(0) ? out[j] : A(0);
    }
    store_vec<T, A, VEC>(y + i, out);
  }
}

// grad_input_nhwc_kernel, VEC consecutive channels per thread.
template <class T, class A, int VEC>
__global__ void grad_input_nhwc_vec_kernel(const T* x, const T* gy, const T* y_relu, const A* mean,
                                           const A* coeff, int64_t channels, int64_t vectors, T* gx,
                                           T* g_residual) {
  LIFTOFF_GRID_STRIDE_LOOP(v, vectors) {
    const int64_t i = v * VEC;
    const int64_t c0 = i % channels;
    A g[VEC];
    load_vec<T, A, VEC>(gy + i, g);
    if (y_relu != nullptr) {
      A yv[VEC];
      load_vec<T, A, VEC>(y_relu + i, yv);
#pragma unroll
      for (int j = 0; j < VEC; ++j) g[j] = yv[j] > A(0) ? g[j] : A(0);  // as masked_grad
    }
    if (g_residual != nullptr) store_vec<T, A, VEC>(g_residual + i, g);
    if (gx != nullptr) {
      A xv[VEC], out[VEC];
      load_vec<T, A, VEC>(x + i, xv);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A* k = coeff + (c0 + j) * 3;
        out[j] = k[0] * (g[j] - k[1] - (xv[j] - mean[c0 + j]) * k[2]);
      }
      store_vec<T, A, VEC>(gx + i, out);
    }
  }
}

template <class T, class A>
__global__ void grad_input_nhwc_kernel(const T* x, const T* gy, const T* y_relu, const A* mean,
                                       const A* coeff, int64_t channels, int64_t total, T* gx,
                                       T* g_residual) {
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t c = i % channels;
    const A g = masked_grad<T, A>(gy, y_relu, i);
    if (g_residual != nullptr) g_residual[i] = convert<T>(g);
    if (gx != nullptr) {
      const A k1 = coeff[c * 3], k2 = coeff[c * 3 + 1], k3 = coeff[c * 3 + 2];
      gx[i] = convert<T>(k1 * (g - k2 - (convert<A>(x[i]) - mean[c]) * k3));
    }
  }
}

}  // namespace
}  // namespace liftoff::cuda
