#include "runtime/tensor_kernels.h"

#include <algorithm>
#include <cstring>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::kernels {

namespace {
template <class To, class From>
To convert(From value) {
  if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

// Visits every element of `t` in row-major order, calling fn(linear_index, element_offset).
template <class Fn>
void for_each_offset(const Shape& shape, const Shape& strides, int64_t base, Fn&& fn) {
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  const size_t nd = shape.size();
  std::vector<int64_t> index(nd, 0);
  int64_t off = base;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, off);
    for (size_t d = nd; d-- > 0;) {
      if (++index[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}
}  // namespace

namespace cpu {

void copy(const Tensor& src, const Tensor& dst) {
  dispatch_all(src.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_all(dst.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* s = static_cast<const S*>(src.storage().data());
      D* d = static_cast<D*>(dst.storage().data());
      // Both dense in the same layout (contiguous, or both channels-last): a linear copy.
      if ((src.is_contiguous() && dst.is_contiguous()) ||
          (src.is_channels_last() && dst.is_channels_last())) {
        const S* sp = s + src.offset();
        D* dp = d + dst.offset();
        const int64_t n = src.numel();
        if constexpr (std::is_same_v<S, D>) {
          std::memcpy(dp, sp, static_cast<size_t>(n) * sizeof(S));
        } else {
          parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) dp[i] = convert<D>(sp[i]);
          });
        }
        return;
      }
      if (dst.is_contiguous()) {
        // Row by row (the last dimension), rows split across the threads: a permute's contiguous() (attention
        // heads) walked every element through the index carry on one thread (10% of ViT-tiny's CPU step).
        D* dp = d + dst.offset();
        const Shape& shape = src.shape();
        const Shape& strides = src.strides();
        const int64_t n = src.numel();
        if (n == 0) return;
        const size_t nd = shape.size();
        const int64_t len = nd == 0 ? 1 : shape[nd - 1];
        const int64_t step = nd == 0 ? 0 : strides[nd - 1];
        const int64_t base = src.offset();
        const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(len, 1));
        parallel_for(0, n / len, grain, [&](int64_t lo, int64_t hi) {
          for (int64_t row = lo; row < hi; ++row) {
            int64_t off = base, rest = row;
            for (size_t k = nd == 0 ? 0 : nd - 1; k-- > 0;) {  // the row's offset over the outer dimensions
              off += rest % shape[k] * strides[k];
              rest /= shape[k];
            }
            const S* __restrict from = s + off;
            D* __restrict to = dp + row * len;
            if (step == 1) {
              for (int64_t j = 0; j < len; ++j) to[j] = convert<D>(from[j]);
            } else {
              for (int64_t j = 0; j < len; ++j) to[j] = convert<D>(from[j * step]);
            }
          }
        });
        return;
      }
      const Tensor packed = src.is_contiguous() ? src : src.clone();
      const S* sp = static_cast<const S*>(packed.raw_data());
      for_each_offset(dst.shape(), dst.strides(), dst.offset(),
                      [&](int64_t i, int64_t off) { d[off] = convert<D>(sp[i]); });
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.storage().data());
    const T v = convert<T>(value);
    if (dst.is_contiguous()) {
      T* p = d + dst.offset();
      parallel_for(0, dst.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) p[i] = v;
      });
    } else {
      for_each_offset(dst.shape(), dst.strides(), dst.offset(), [&](int64_t, int64_t off) { d[off] = v; });
    }
  });
}

void accumulate(const Tensor& dst, const Tensor& src) {
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* d = static_cast<T*>(dst.raw_data());
      const T* s = static_cast<const T*>(src.raw_data());
      for (int64_t i = 0; i < dst.numel(); ++i) d[i] = T(static_cast<float>(d[i]) + static_cast<float>(s[i]));
    } else {
      T* d = static_cast<T*>(dst.raw_data());
      const T* s = static_cast<const T*>(src.raw_data());
      parallel_for(0, dst.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) d[i] += s[i];
      });
    }
  });
}

}  // namespace cpu

void copy(const Tensor& src, const Tensor& dst) {
  if (src.device().is_cpu() && dst.device().is_cpu()) return cpu::copy(src, dst);
#if LIFTOFF_WITH_CUDA
  cuda::copy(src, dst);
#else
  throw DeviceError("copy: built without CUDA");
#endif
}

void fill(const Tensor& dst, double value) {
  if (dst.device().is_cpu()) return cpu::fill(dst, value);
#if LIFTOFF_WITH_CUDA
  cuda::fill(dst, value);
#else
  throw DeviceError("fill: built without CUDA");
#endif
}

void accumulate(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu()) return cpu::accumulate(dst, src);
#if LIFTOFF_WITH_CUDA
  cuda::accumulate(dst, src);
#else
  throw DeviceError("accumulate: built without CUDA");
#endif
}

}  // namespace liftoff::kernels
