#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/softmax/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Runs body(column pointer offset) for every (outer, inner) column, in parallel.
template <class Fn>
void for_each_column(int64_t outer, int64_t extent, int64_t inner, Fn&& body) {
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, extent));
  parallel_for(0, outer * inner, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) body((c / inner) * extent * inner + c % inner);
  });
}
}  // namespace

void softmax_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, bool log,
                     const Tensor& y) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for_each_column(outer, extent, inner, [&](int64_t base) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < extent; ++r) m = std::max(m, static_cast<double>(in[base + r * inner]));
      if (std::isinf(m)) m = m > 0 ? m : 0.0;  // all -inf: exp(-inf) = 0 below, not NaN
      double s = 0.0;
      for (int64_t r = 0; r < extent; ++r) s += std::exp(static_cast<double>(in[base + r * inner]) - m);
      const double log_s = std::log(s);
      for (int64_t r = 0; r < extent; ++r) {
        const double z = static_cast<double>(in[base + r * inner]) - m;
        out[base + r * inner] = static_cast<T>(log ? z - log_s : std::exp(z) / s);
      }
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& gy, int64_t outer, int64_t extent, int64_t inner,
                      bool log, const Tensor& gx) {
  dispatch_float(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = y.data<T>();
    const T* pg = gy.data<T>();
    T* out = gx.data<T>();
    for_each_column(outer, extent, inner, [&](int64_t base) {
      double dot = 0.0;  // sum(gy * y) for softmax, sum(gy) for log_softmax
      for (int64_t r = 0; r < extent; ++r) {
        const int64_t i = base + r * inner;
        dot += static_cast<double>(pg[i]) * (log ? 1.0 : static_cast<double>(py[i]));
      }
      for (int64_t r = 0; r < extent; ++r) {
        const int64_t i = base + r * inner;
        const double yv = static_cast<double>(py[i]);
        const double g = static_cast<double>(pg[i]);
        out[i] = static_cast<T>(log ? g - std::exp(yv) * dot : yv * (g - dot));
      }
    });
  });
}

}  // namespace liftoff::cpu
