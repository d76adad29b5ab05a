#include <utility>

#include "ops/ema/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;
}

void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay) {
  dispatch_float(averaged[0].dtype(), "ema_update", [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(decay), take = static_cast<T>(1.0 - decay);
    for (size_t t = 0; t < averaged.size(); ++t) {
      T* avg = averaged[t].data<T>();
      const T* cur = current[t].data<T>();
      parallel_for(0, averaged[t].numel(), kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) avg[i] = keep * avg[i] + take * cur[i];
      });
    }
  });
}

void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  dispatch_float(a[0].dtype(), "swap_contents", [&](auto tag) {
    using T = decltype(tag);
    for (size_t t = 0; t < a.size(); ++t) {
      T* x = a[t].data<T>();
      T* y = b[t].data<T>();
      parallel_for(0, a[t].numel(), kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) std::swap(x[i], y[i]);
      });
    }
  });
}

}  // namespace liftoff::cpu
