#include "ops/unary/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {

constexpr int64_t kGrain = 1 << 14;

// Pointers and the functor are copied into each chunk as restrict locals: without that the compiler reloads
// them through the closure every element and the loop stays scalar.
template <class T, class F>
void forward_loop(F f, const T* in, T* out, int64_t n) {
  parallel_for(0, n, kGrain, [f, in, out](int64_t lo, int64_t hi) {
    const T* __restrict src = in + lo;
    T* __restrict dst = out + lo;
    const int64_t count = hi - lo;
    for (int64_t i = 0; i < count; ++i) dst[i] = f(src[i]);
  });
}

template <class T, class F>
void backward_loop(F f, const T* saved, const T* grad_y, T* grad_x, int64_t n) {
  parallel_for(0, n, kGrain, [f, saved, grad_y, grad_x](int64_t lo, int64_t hi) {
    const T* __restrict s = saved + lo;
    const T* __restrict g = grad_y + lo;
    T* __restrict dst = grad_x + lo;
    const int64_t count = hi - lo;
    for (int64_t i = 0; i < count; ++i) dst[i] = g[i] * f.grad(s[i]);
  });
}

}  // namespace

void unary_forward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "unary op", [&](auto tag) {
    using T = decltype(tag);
    unary::visit_unary(op, params, [&](auto f) { forward_loop<T>(f, x.data<T>(), y.data<T>(), x.numel()); });
  });
}

void unary_backward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& saved,
                    const Tensor& grad_y, const Tensor& grad_x) {
  dispatch_float(grad_y.dtype(), "unary op backward", [&](auto tag) {
    using T = decltype(tag);
    unary::visit_unary(op, params, [&](auto f) {
      backward_loop<T>(f, saved.data<T>(), grad_y.data<T>(), grad_x.data<T>(), grad_y.numel());
    });
  });
}

}  // namespace liftoff::cpu
