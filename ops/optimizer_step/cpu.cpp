#include <cmath>

#include "ops/optimizer_step/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;
}

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdScalars& s) {
  dispatch_float(params[0].dtype(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    const T lr = static_cast<T>(s.lr), momentum = static_cast<T>(s.momentum),
            wd = static_cast<T>(s.weight_decay);
    for (size_t t = 0; t < params.size(); ++t) {
      T* p = params[t].data<T>();
      const T* g = grads[t].data<T>();
      T* buf = momentum_buffers.empty() ? nullptr : momentum_buffers[t].data<T>();
      parallel_for(0, params[t].numel(), kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          T d = g[i];
          if (wd != T(0)) d += wd * p[i];
          if (buf) {
            buf[i] = momentum * buf[i] + d;
            d = s.nesterov ? d + momentum * buf[i] : buf[i];
          }
          p[i] -= lr * d;
        }
      });
    }
  });
}

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWScalars& s) {
  dispatch_float(params[0].dtype(), "adamw_step", [&](auto tag) {
    using T = decltype(tag);
    const T decay = static_cast<T>(s.decay);
    const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2);
    const T one_minus_b1 = static_cast<T>(1.0 - s.beta1), one_minus_b2 = static_cast<T>(1.0 - s.beta2);
    const T step_size = static_cast<T>(s.step_size), bc2_sqrt = static_cast<T>(s.bias_correction2_sqrt);
    const T eps = static_cast<T>(s.eps);
    for (size_t t = 0; t < params.size(); ++t) {
      T* p = params[t].data<T>();
      const T* g = grads[t].data<T>();
      T* m = exp_avg[t].data<T>();
      T* v = exp_avg_sq[t].data<T>();
      parallel_for(0, params[t].numel(), kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          p[i] *= decay;
          m[i] = b1 * m[i] + one_minus_b1 * g[i];
          v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
          p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
        }
      });
    }
  });
}

}  // namespace liftoff::cpu
