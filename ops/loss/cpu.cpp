#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/common/index_dtype.h"
#include "ops/loss/kernels.h"
#include "ops/loss/loss_math.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kChunk = 4096;

// sum of f(i) over [0, n) in double: fixed chunks summed in parallel, then the chunk sums in order, so the
// result does not depend on the thread count.
template <class F>
double fixed_order_sum(int64_t n, const F& f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s = 0.0;
      const int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < end; ++i) s += static_cast<double>(f(i));
      partial[static_cast<size_t>(c)] = s;
    }
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
}  // namespace

void pointwise_loss_forward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                            const Tensor& pw, const Tensor& out) {
  dispatch_float(x.dtype(), "loss", [&](auto tag) {
    using T = decltype(tag);
    const T *xd = x.data<T>(), *td = t.data<T>(), *wd = data_or_null<T>(w), *pwd = data_or_null<T>(pw);
    const T p = static_cast<T>(a.param);
    const auto elem = [&](int64_t i) {
      return loss_math::value<T>(a.kind, p, xd[i], td[i], wd ? wd[i] : T(1), pwd ? pwd[i] : T(1));
    };
    if (a.reduce) {
      out.data<T>()[0] = static_cast<T>(fixed_order_sum(x.numel(), elem) / a.divisor);
      return;
    }
    T* o = out.data<T>();
    parallel_for(0, x.numel(), kChunk, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = elem(i);
    });
  });
}

void pointwise_loss_backward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                             const Tensor& pw, const Tensor& gy, const Tensor& gx, const Tensor& gt) {
  dispatch_float(x.dtype(), "loss backward", [&](auto tag) {
    using T = decltype(tag);
    const T *xd = x.data<T>(), *td = t.data<T>(), *wd = data_or_null<T>(w), *pwd = data_or_null<T>(pw);
    const T* g = gy.data<T>();
    T* gxd = gx.defined() ? gx.data<T>() : nullptr;
    T* gtd = gt.defined() ? gt.data<T>() : nullptr;
    const T p = static_cast<T>(a.param);
    const T g_reduced = a.reduce ? static_cast<T>(static_cast<double>(g[0]) / a.divisor) : T(0);
    parallel_for(0, x.numel(), kChunk, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T gi = a.reduce ? g_reduced : g[i];
        const auto d = loss_math::grad<T>(a.kind, p, xd[i], td[i], wd ? wd[i] : T(1), pwd ? pwd[i] : T(1));
        if (gxd) gxd[i] = gi * d.dx;
        if (gtd) gtd[i] = gi * d.dt;
      }
    });
  });
}

void nll_loss_forward(const NllLossArgs& a, const Tensor& x, const Tensor& target, const Tensor& w,
                      const Tensor& out, const Tensor& total_weight) {
  dispatch_float(x.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(target.dtype(), "nll_loss", [&](auto itag) {
      using I = decltype(itag);
      const T *xd = x.data<T>(), *wd = data_or_null<T>(w);
      const I* td = target.data<I>();
      const int64_t rows = a.n * a.inner;
      const auto weight_at = [&](int64_t r) {
        const int64_t c = static_cast<int64_t>(td[r]);
        return c == a.ignore_index ? T(0) : (wd ? wd[c] : T(1));
      };
      const auto loss_at = [&](int64_t r) {
        const int64_t c = static_cast<int64_t>(td[r]);
        if (c == a.ignore_index) return T(0);
        const int64_t s = r % a.inner;
        return -weight_at(r) * xd[((r - s) * a.classes + c * a.inner) + s];
      };
      if (!a.reduce) {
        T* o = out.data<T>();
        for (int64_t r = 0; r < rows; ++r) o[r] = loss_at(r);
        total_weight.fill_(0.0);
        return;
      }
      const double sum_loss = fixed_order_sum(rows, loss_at);
      const double sum_weight = fixed_order_sum(rows, weight_at);
      total_weight.fill_(sum_weight);
      out.data<T>()[0] = static_cast<T>(a.mean ? sum_loss / sum_weight : sum_loss);
    });
  });
}

void nll_loss_backward(const NllLossArgs& a, const Tensor& target, const Tensor& w,
                       const Tensor& total_weight, const Tensor& gy, const Tensor& gx) {
  gx.zero_();
  dispatch_float(gx.dtype(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(target.dtype(), "nll_loss backward", [&](auto itag) {
      using I = decltype(itag);
      const T *g = gy.data<T>(), *wd = data_or_null<T>(w);
      const I* td = target.data<I>();
      T* gxd = gx.data<T>();
      const double divisor = a.reduce && a.mean ? total_weight.item() : 1.0;
      const T g_reduced = a.reduce ? static_cast<T>(static_cast<double>(g[0]) / divisor) : T(0);
      for (int64_t r = 0; r < a.n * a.inner; ++r) {
        const int64_t c = static_cast<int64_t>(td[r]);
        if (c == a.ignore_index) continue;
        const int64_t s = r % a.inner;
        gxd[(r - s) * a.classes + c * a.inner + s] = -(wd ? wd[c] : T(1)) * (a.reduce ? g_reduced : g[r]);
      }
    });
  });
}

}  // namespace liftoff::cpu
