// The reductions as (identity, map, combine, value) over an accumulation type A, shared by the CPU kernels
// (A = double) and the CUDA kernels (A = float for 16-bit and f32 inputs, double for f64). combine is
// associative up to rounding, and the kernels combine in an order fixed by the shapes, so results are
// deterministic. Reducers that track an index break ties by the smaller index, so their result does not
// depend on the order at all.
#pragma once
#include <cstdint>

#include "ops/common/device_math.h"

namespace liftoff {

enum class ReduceKind { sum, max, min, var, logsumexp, norm };

// Elementwise gradients of the reductions that need more than a broadcast: gx = f(x, gy, stat), with gy and
// stat broadcast (keepdim) over x's shape through `plan` (inputs x, gy, stat, in that order; an undefined gy
// is the constant 1 and has no strides in the plan).
enum class ReduceGradKind {
  var,        // gy * 2 (x - stat) * param, stat = mean, param = 1 / (N - correction)
  norm,       // gy * sign(x) |x|^(param-1) / stat^(param-1), 0 where stat == 0; stat = the norm, param = p
              // (for p = inf: gy * sign(x) where |x| == stat, else 0)
  logsumexp,  // gy * exp(x - stat), stat = the logsumexp
  equal,      // gy where x == stat, else 0 (amax/amin: the elements that are the result)
  abs_equal,  // gy where |x| == stat, else 0 (the inf-norm's maximal elements)
};

// What the front passes to the kernels; each reducer takes what it needs.
struct ReduceParams {
  ReduceKind kind = ReduceKind::sum;
  double scale = 1.0;      // sum: multiplies the result (1/N for mean)
  double p = 2.0;          // norm: the order (inf for max |x|)
  double correction = 1;   // var: divides by N - correction
  bool take_sqrt = false;  // var: return the standard deviation
};

template <class A>
struct SumReducer {
  using State = A;
  A scale;
  LIFTOFF_HD State identity() const { return A(0); }
  LIFTOFF_HD State map(A x, int64_t) const { return x; }
  LIFTOFF_HD State combine(State a, State b) const { return a + b; }
  LIFTOFF_HD A value(State s) const { return s * scale; }
  LIFTOFF_HD int64_t index(State) const { return 0; }
};

template <class A>
struct ValueIndex {
  A v;
  int64_t i;
};

// max (kMax) or min with the first index; NaN wins (the first NaN), as PyTorch.
template <class A, bool kMax>
struct ExtremeReducer {
  using State = ValueIndex<A>;
  LIFTOFF_HD State identity() const { return {kMax ? -math::infinity<A>() : math::infinity<A>(), INT64_MAX}; }
  LIFTOFF_HD State map(A x, int64_t i) const { return {x, i}; }
  LIFTOFF_HD State combine(State a, State b) const {
    const bool an = math::is_nan(a.v);
    const bool bn = math::is_nan(b.v);
    bool a_wins;
    if (an || bn) {
      a_wins = an && (!bn || a.i < b.i);
    } else if (a.v != b.v) {
      a_wins = kMax ? a.v > b.v : a.v < b.v;
    } else {
      a_wins = a.i < b.i;
    }
    return a_wins ? a : b;
  }
  LIFTOFF_HD A value(State s) const { return s.v; }
  LIFTOFF_HD int64_t index(State s) const { return s.i; }
};

// max (kMax) or min of the values alone (amax, amin, max over all: no index wanted); NaN wins, as
// ExtremeReducer's value. A single compare per element, where the index-tracking state is compute bound
// for 16-bit inputs.
template <class A, bool kMax>
struct ValueExtremeReducer {
  using State = A;
  LIFTOFF_HD State identity() const { return kMax ? -math::infinity<A>() : math::infinity<A>(); }
  LIFTOFF_HD State map(A x, int64_t) const { return x; }
  LIFTOFF_HD State combine(State a, State b) const {
    return (math::is_nan(a) || (kMax ? a >= b : a <= b)) ? a : b;  // b when b is NaN
  }
  LIFTOFF_HD A value(State s) const { return s; }
  LIFTOFF_HD int64_t index(State) const { return 0; }
};

template <class A>
struct Moments {
  A mean;
  A m2;  // sum of squared deviations from mean
  int64_t n;
};

// Welford's update, merged with Chan et al.'s formula.
template <class A>
struct VarReducer {
  using State = Moments<A>;
  A correction;
  bool take_sqrt;
  LIFTOFF_HD State identity() const { return {A(0), A(0), 0}; }
  LIFTOFF_HD State map(A x, int64_t) const { return {x, A(0), 1}; }
  LIFTOFF_HD State combine(State a, State b) const {
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    const int64_t n = a.n + b.n;
    const A nb = static_cast<A>(b.n) / static_cast<A>(n);
    const A delta = b.mean - a.mean;
    return {a.mean + delta * nb, a.m2 + b.m2 + delta * delta * static_cast<A>(a.n) * nb, n};
  }
  LIFTOFF_HD A value(State s) const {
    if (s.n == 0) return math::quiet_nan<A>();
    const A v = s.m2 / (static_cast<A>(s.n) - correction);
    return take_sqrt ? math::sqrt_of(v) : v;
  }
  LIFTOFF_HD int64_t index(State) const { return 0; }
};

template <class A>
struct MaxSum {
  A m;  // running maximum
  A s;  // sum of exp(x - m)
};

template <class A>
struct LogSumExpReducer {
  using State = MaxSum<A>;
  LIFTOFF_HD State identity() const { return {-math::infinity<A>(), A(0)}; }
  LIFTOFF_HD State map(A x, int64_t) const { return {x, A(1)}; }
  LIFTOFF_HD State combine(State a, State b) const {
    if (math::is_nan(a.m)) return a;
    if (math::is_nan(b.m)) return b;
    if (a.m == b.m) return {a.m, a.s + b.s};  // also both infinite: no inf - inf
    if (a.m > b.m) return {a.m, a.s + b.s * math::exp_of(b.m - a.m)};
    return {b.m, b.s + a.s * math::exp_of(a.m - b.m)};
  }
  LIFTOFF_HD A value(State s) const {
    if (s.m == math::infinity<A>() || s.m == -math::infinity<A>()) return s.m;
    return s.m + math::log_of(s.s);
  }
  LIFTOFF_HD int64_t index(State) const { return 0; }
};

// Vector p-norm; p = 1, 2 and inf have exact special cases.
template <class A>
struct NormReducer {
  using State = A;
  A p;
  LIFTOFF_HD bool is_inf() const { return p == math::infinity<A>(); }
  LIFTOFF_HD State identity() const { return A(0); }
  LIFTOFF_HD State map(A x, int64_t) const {
    const A a = math::abs_of(x);
    if (p == A(2)) return x * x;
    if (p == A(1) || is_inf()) return a;
    return math::pow_of(a, p);
  }
  LIFTOFF_HD State combine(State a, State b) const {
    if (!is_inf()) return a + b;
    return (math::is_nan(a) || b <= a) ? a : b;  // NaN propagates
  }
  LIFTOFF_HD A value(State s) const {
    if (p == A(2)) return math::sqrt_of(s);
    if (p == A(1) || is_inf()) return s;
    return math::pow_of(s, A(1) / p);
  }
  LIFTOFF_HD int64_t index(State) const { return 0; }
};

template <class A>
LIFTOFF_HD A sign_of(A x) {
  return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0));
}

// The elementwise gradients of ReduceGradKind (kernels.h): f(x, gy, stat).
template <class A>
struct VarGrad {
  A scale;  // 2 / (N - correction)
  LIFTOFF_HD A operator()(A x, A gy, A mean) const { return gy * (x - mean) * scale; }
};
template <class A>
struct NormGrad {
  A p;
  LIFTOFF_HD A operator()(A x, A gy, A norm) const {
    if (p == math::infinity<A>()) return math::abs_of(x) == norm ? gy * sign_of(x) : A(0);
    if (norm == A(0)) return A(0);
    if (p == A(2)) return gy * x / norm;
    if (p == A(1)) return gy * sign_of(x);
    return gy * sign_of(x) * math::pow_of(math::abs_of(x) / norm, p - A(1));
  }
};
template <class A>
struct LogSumExpGrad {
  LIFTOFF_HD A operator()(A x, A gy, A lse) const { return gy * math::exp_of(x - lse); }
};
template <class A, bool kAbs>
struct EqualGrad {
  LIFTOFF_HD A operator()(A x, A gy, A stat) const {
    return (kAbs ? math::abs_of(x) : x) == stat ? gy : A(0);
  }
};

template <class A, class Fn>
void visit_reduce_grad(ReduceGradKind kind, double param, Fn&& fn) {
  switch (kind) {
    case ReduceGradKind::var:
      fn(VarGrad<A>{static_cast<A>(2 * param)});
      return;
    case ReduceGradKind::norm:
      fn(NormGrad<A>{static_cast<A>(param)});
      return;
    case ReduceGradKind::logsumexp:
      fn(LogSumExpGrad<A>{});
      return;
    case ReduceGradKind::equal:
      fn(EqualGrad<A, false>{});
      return;
    case ReduceGradKind::abs_equal:
      fn(EqualGrad<A, true>{});
      return;
  }
}

// Calls fn(reducer) with the reducer for params over accumulation type A.
template <class A, class Fn>
void visit_reducer(const ReduceParams& params, Fn&& fn) {
  switch (params.kind) {
    case ReduceKind::sum:
      fn(SumReducer<A>{static_cast<A>(params.scale)});
      return;
    case ReduceKind::max:
      fn(ExtremeReducer<A, true>{});
      return;
    case ReduceKind::min:
      fn(ExtremeReducer<A, false>{});
      return;
    case ReduceKind::var:
      fn(VarReducer<A>{static_cast<A>(params.correction), params.take_sqrt});
      return;
    case ReduceKind::logsumexp:
      fn(LogSumExpReducer<A>{});
      return;
    case ReduceKind::norm:
      fn(NormReducer<A>{static_cast<A>(params.p)});
      return;
  }
}

}  // namespace liftoff
