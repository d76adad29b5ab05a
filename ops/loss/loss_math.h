// The elementwise loss formulas, shared by the CPU and CUDA kernels so both compute the same thing. A is the
// computation type (float or double).
#pragma once
#include <cmath>

#include "ops/loss/kernels.h"
#include "runtime/macros.h"

namespace liftoff::loss_math {

template <class A>
LIFTOFF_HD A exp_(A v) {
  if constexpr (sizeof(A) == sizeof(float)) {
    return expf(v);
  } else {
    return exp(v);
  }
}
template <class A>
LIFTOFF_HD A log_(A v) {
  if constexpr (sizeof(A) == sizeof(float)) {
    return logf(v);
  } else {
    return log(v);
  }
}
template <class A>
LIFTOFF_HD A abs_(A v) {
  return v < A(0) ? -v : v;
}
template <class A>
LIFTOFF_HD A sign_(A v) {
  return v > A(0) ? A(1) : (v < A(0) ? A(-1) : A(0));
}
// log(1 + exp(z)) without overflow.
template <class A>
LIFTOFF_HD A softplus(A z) {
  const A e = exp_(-abs_(z));
  if constexpr (sizeof(A) == sizeof(float)) {
    return (z > A(0) ? z : A(0)) + log1pf(e);
  } else {
    return (z > A(0) ? z : A(0)) + log1p(e);
  }
}
// x * log(y), 0 where x == 0 (PyTorch's xlogy).
template <class A>
LIFTOFF_HD A xlogy(A x, A y) {
  return x == A(0) ? A(0) : x * log_(y);
}

// The loss of one element: x input, t target, w weight, pw pos_weight (both 1 when absent), p beta/delta.
template <class A>
LIFTOFF_HD A value(PointwiseLoss kind, A p, A x, A t, A w, A pw) {
  const A d = x - t;
  switch (kind) {
    case PointwiseLoss::mse:
      return d * d;
    case PointwiseLoss::l1:
      return abs_(d);
    case PointwiseLoss::smooth_l1:
      return abs_(d) < p ? A(0.5) * d * d / p : abs_(d) - A(0.5) * p;
    case PointwiseLoss::huber:
      return abs_(d) < p ? A(0.5) * d * d : p * (abs_(d) - A(0.5) * p);
    case PointwiseLoss::bce_logits:
      return w * ((A(1) - t) * x + (A(1) + (pw - A(1)) * t) * softplus(-x));
    case PointwiseLoss::kl_div:
      return xlogy(t, t) - t * x;
    case PointwiseLoss::kl_div_log_target:
      return exp_(t) * (t - x);
  }
  return A(0);
}

template <class A>
struct Grad {
  A dx, dt;
};

// d value / d x and d value / d t.
template <class A>
LIFTOFF_HD Grad<A> grad(PointwiseLoss kind, A p, A x, A t, A w, A pw) {
  const A d = x - t;
  switch (kind) {
    case PointwiseLoss::mse:
      return {A(2) * d, A(-2) * d};
    case PointwiseLoss::l1:
      return {sign_(d), -sign_(d)};
    case PointwiseLoss::smooth_l1: {
      const A g = d < -p ? A(-1) : (d > p ? A(1) : d / p);
      return {g, -g};
    }
    case PointwiseLoss::huber: {
      const A g = d < -p ? -p : (d > p ? p : d);
      return {g, -g};
    }
    case PointwiseLoss::bce_logits: {
      const A sigmoid_neg = A(1) / (A(1) + exp_(x));
      return {w * ((A(1) - t) - (A(1) + (pw - A(1)) * t) * sigmoid_neg),
              w * (-x + (pw - A(1)) * softplus(-x))};
    }
    case PointwiseLoss::kl_div:
      return {-t, t == A(0) ? A(0) : log_(t) + A(1) - x};
    case PointwiseLoss::kl_div_log_target: {
      const A e = exp_(t);
      return {-e, e * (t - x + A(1))};
    }
  }
  return {A(0), A(0)};
}

}  // namespace liftoff::loss_math
