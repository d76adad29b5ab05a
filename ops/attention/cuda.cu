#include <cmath>

#include "ops/attention/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;  // one row per warp

template <class A>
__device__ __forceinline__ A exp_acc(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Row r of the scores with its mask and the causal rule applied, in the accumulation type.
template <class T>
struct MaskedRow {
  const T* row;
  AttentionMask mask;
  int64_t moff, i;
  bool causal;

  __device__ __forceinline__ acc_t<T> operator()(int64_t j) const {
    using A = acc_t<T>;
    const A neg_inf = -static_cast<A>(INFINITY);
    if (causal && j > i) return neg_inf;
    const A v = convert<A>(row[j]);
    if (mask.kind == AttentionMask::kBool)
      return static_cast<const uint8_t*>(mask.data)[moff + j * mask.stride_s] ? v : neg_inf;
    if (mask.kind == AttentionMask::kAdditive)
      return v + convert<A>(static_cast<const T*>(mask.data)[moff + j * mask.stride_s]);
    return v;
  }
};

// Softmax of one row per warp in two passes: an online max/sum (each lane over its strided keys, then merged
// across the warp), then the normalised write. Fully masked rows come out as zeros.
template <class T>
__global__ void softmax_forward_kernel(T* scores, T* dropped, AttentionMask mask, AttentionRows rows,
                                       acc_t<T> keep_scale, float threshold) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows.rows) return;
  const int64_t i = r % rows.l;
  T* row = scores + r * rows.s;
  const PhiloxDraw draw = dropped ? rows.draw.resolve() : PhiloxDraw{};
  const MaskedRow<T> value{row, mask, mask.kind == AttentionMask::kNone ? 0 : mask.row_offset(r / rows.l, i),
                           i, rows.causal};
  const A neg_inf = -static_cast<A>(INFINITY);
  A m = neg_inf, sum = 0;
  for (int64_t j = lane; j < rows.s; j += kWarp) {
    const A v = value(j);
    if (v == neg_inf) continue;
    if (v > m) {
      sum = sum * exp_acc(m - v) + A(1);
      m = v;
    } else {
      sum += exp_acc(v - m);
    }
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const A m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const A s2 = __shfl_xor_sync(0xffffffffu, sum, o);
    const A mn = m > m2 ? m : m2;
    sum = (m == neg_inf ? A(0) : sum * exp_acc(m - mn)) + (m2 == neg_inf ? A(0) : s2 * exp_acc(m2 - mn));
    m = mn;
  }
  const A inv = sum > A(0) ? A(1) / sum : A(0);
  for (int64_t j = lane; j < rows.s; j += kWarp) {
    const A v = value(j);
    const A prob = v == neg_inf ? A(0) : exp_acc(v - m) * inv;
    row[j] = convert<T>(prob);
    if (dropped) {
      const bool keep = attention_keep(draw, static_cast<uint64_t>(r * rows.s + j), threshold);
      dropped[r * rows.s + j] = convert<T>(keep ? prob * keep_scale : A(0));
    }
  }
}

// dS = P * (dP - sum_j dP_j P_j) per row (one warp), dP regenerated from the dropout mask in both passes.
template <class T>
__global__ void softmax_backward_kernel(const T* probs, T* grad, AttentionRows rows, acc_t<T> keep_scale,
                                        float threshold) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows.rows) return;
  const T* p = probs + r * rows.s;
  T* g = grad + r * rows.s;
  const bool dropout = rows.dropout_p > 0.0;
  const PhiloxDraw draw = dropout ? rows.draw.resolve() : PhiloxDraw{};
  const auto dp = [&](int64_t j) {
    const A d = convert<A>(g[j]);
    if (!dropout) return d;
    return attention_keep(draw, static_cast<uint64_t>(r * rows.s + j), threshold) ? d * keep_scale : A(0);
  };
  A dot = 0;
  for (int64_t j = lane; j < rows.s; j += kWarp) dot += dp(j) * convert<A>(p[j]);
  dot = warp_sum(dot);
  for (int64_t j = lane; j < rows.s; j += kWarp) g[j] = convert<T>(convert<A>(p[j]) * (dp(j) - dot));
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
}  // namespace

void attention_softmax_forward(const Tensor& scores, const Tensor& dropped, const AttentionMask& mask,
                               const AttentionRows& rows) {
  const int device = scores.device().index;
  DeviceGuard guard(device);
  if (rows.rows == 0 || rows.s == 0) return;
  dispatch_device_float(scores.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A keep_scale = rows.dropout_p < 1.0 ? static_cast<A>(1.0 / (1.0 - rows.dropout_p)) : A(0);
    softmax_forward_kernel<T><<<row_blocks(rows.rows), kWarp * kWarpsPerBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(scores.raw_data()), dropped.defined() ? static_cast<T*>(dropped.raw_data()) : nullptr,
        mask, rows, keep_scale, static_cast<float>(rows.dropout_p));
    LIFTOFF_LAUNCH_CHECK();
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad, const AttentionRows& rows) {
  const int device = probs.device().index;
  DeviceGuard guard(device);
  if (rows.rows == 0 || rows.s == 0) return;
  dispatch_device_float(probs.dtype(), "scaled_dot_product_attention backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A keep_scale = rows.dropout_p < 1.0 ? static_cast<A>(1.0 / (1.0 - rows.dropout_p)) : A(0);
    softmax_backward_kernel<T><<<row_blocks(rows.rows), kWarp * kWarpsPerBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(probs.raw_data()), static_cast<T*>(grad.raw_data()), rows, keep_scale,
        static_cast<float>(rows.dropout_p));
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
