#include <atomic>
#include <cmath>
#include <type_traits>

#include "ops/amp/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;

// The CPU storage types a gradient may have; 16-bit floats compute in f32.
template <class Fn>
void dispatch_grad(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(float{});
      return;
    case DType::f64:
      fn(double{});
      return;
    case DType::f16:
      fn(Half{});
      return;
    case DType::bf16:
      fn(BFloat16{});
      return;
    default:
      throw DTypeError(str_cat("unscale_and_check: dtype ", dtype_name(dtype), " is not floating"));
  }
}

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class I>
void update_scale_typed(float* scale, I* tracker, float found_inf, const UpdateScaleArgs& args,
                        int64_t* skipped) {
  if (found_inf != 0.0f) {  // NaN counts as found
    *scale = static_cast<float>(static_cast<double>(*scale) * args.backoff_factor);
    *tracker = 0;
    if (skipped != nullptr) ++*skipped;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*tracker) + 1;
  if (successful >= args.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(*scale) * args.growth_factor);
    if (std::isfinite(grown)) *scale = grown;
    *tracker = 0;
  } else {
    *tracker = static_cast<I>(successful);
  }
}
}  // namespace

void scale_by_forward(const Tensor& x, const Tensor& factor, const Tensor& y) {
  const float f = *static_cast<const float*>(factor.raw_data());
  dispatch_float(x.dtype(), "scale_by", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T factor_t = static_cast<T>(f);
    parallel_for(0, x.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = in[i] * factor_t;
    });
  });
}

void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const float inv = *static_cast<const float*>(inv_scale.raw_data());
  std::atomic<bool> found{false};
  dispatch_grad(grads[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const C inv_c = static_cast<C>(inv);
    for (const Tensor& grad : grads) {
      T* g = static_cast<T*>(grad.raw_data());
      parallel_for(0, grad.numel(), kGrain, [&](int64_t lo, int64_t hi) {
        bool bad = false;
        for (int64_t i = lo; i < hi; ++i) {
          const C v = static_cast<C>(g[i]);
          bad |= !std::isfinite(v);
          g[i] = T(v * inv_c);
        }
        if (bad) found.store(true, std::memory_order_relaxed);
      });
    }
  });
  if (found.load()) *static_cast<float*>(found_inf.raw_data()) = 1.0f;
}

void inverse_scale(const Tensor& scale, const Tensor& inv_scale) {
  const float s = *static_cast<const float*>(scale.raw_data());
  *static_cast<float*>(inv_scale.raw_data()) = static_cast<float>(1.0 / static_cast<double>(s));
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  const UpdateScaleArgs& args, const Tensor& skipped_steps) {
  float* s = static_cast<float*>(scale.raw_data());
  const float inf = *static_cast<const float*>(found_inf.raw_data());
  int64_t* skipped = skipped_steps.defined() ? static_cast<int64_t*>(skipped_steps.raw_data()) : nullptr;
  if (growth_tracker.dtype() == DType::i64) {
    update_scale_typed(s, static_cast<int64_t*>(growth_tracker.raw_data()), inf, args, skipped);
  } else {
    update_scale_typed(s, static_cast<int32_t*>(growth_tracker.raw_data()), inf, args, skipped);
  }
}

}  // namespace liftoff::cpu
