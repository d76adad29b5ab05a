// The binary ops and their gradients as functors over an accumulation type A (float/double), shared by the
// CPU kernels and the CUDA kernels.
#pragma once
#include "ops/common/device_math.h"

namespace liftoff {

enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum };

// y = op(a, b); alpha scales b for add and sub.
template <BinaryOp Op, class A>
struct BinaryForward {
  A alpha;
  LIFTOFF_HD A operator()(A a, A b) const {
    if constexpr (Op == BinaryOp::add) {
      return a + alpha * b;
    } else if constexpr (Op == BinaryOp::sub) {
      return a - alpha * b;
    } else if constexpr (Op == BinaryOp::mul) {
      return a * b;
    } else if constexpr (Op == BinaryOp::div) {
      return a / b;
    } else if constexpr (Op == BinaryOp::pow) {
      return math::pow_of(a, b);
    } else if constexpr (Op == BinaryOp::maximum) {
      return math::is_nan(a) || a > b ? a : b;  // b when b is NaN (a > NaN is false)
    } else {
      return math::is_nan(a) || a < b ? a : b;
    }
  }
};

// The gradient for operand Which (0: a, 1: b) from (gy, a, b).
template <BinaryOp Op, int Which, class A>
struct BinaryGrad {
  A alpha;
  LIFTOFF_HD A operator()(A gy, A a, A b) const {
    if constexpr (Op == BinaryOp::add) {
      return Which == 0 ? gy : alpha * gy;
    } else if constexpr (Op == BinaryOp::sub) {
      return Which == 0 ? gy : -alpha * gy;
    } else if constexpr (Op == BinaryOp::mul) {
      return Which == 0 ? gy * b : gy * a;
    } else if constexpr (Op == BinaryOp::div) {
      return Which == 0 ? gy / b : -gy * a / (b * b);
    } else if constexpr (Op == BinaryOp::pow) {
      if constexpr (Which == 0) {
        return b == A(0) ? A(0) : gy * b * math::pow_of(a, b - A(1));
      } else {
        return a == A(0) && b >= A(0) ? A(0) : gy * math::pow_of(a, b) * math::log_of(a);
      }
    } else {
      // maximum: a loses where a < b; minimum: a loses where a > b; equal operands split the gradient.
      constexpr bool kMax = Op == BinaryOp::maximum;
      const A mine = Which == 0 ? a : b;
      const A other = Which == 0 ? b : a;
      if (mine == other) return gy / A(2);
      return (kMax ? mine < other : mine > other) ? A(0) : gy;
    }
  }
};

// Operands whose values the gradients need (add and sub need none).
inline bool grad_reads_operands(BinaryOp op) {
  return op != BinaryOp::add && op != BinaryOp::sub;
}

// Calls fn(functor) with BinaryForward<op, A>{alpha}.
template <class A, class Fn>
void visit_binary(BinaryOp op, double alpha, Fn&& fn) {
  const A al = static_cast<A>(alpha);
  switch (op) {
    case BinaryOp::add:
      fn(BinaryForward<BinaryOp::add, A>{al});
      return;
    case BinaryOp::sub:
      fn(BinaryForward<BinaryOp::sub, A>{al});
      return;
    case BinaryOp::mul:
      fn(BinaryForward<BinaryOp::mul, A>{al});
      return;
    case BinaryOp::div:
      fn(BinaryForward<BinaryOp::div, A>{al});
      return;
    case BinaryOp::pow:
      fn(BinaryForward<BinaryOp::pow, A>{al});
      return;
    case BinaryOp::maximum:
      fn(BinaryForward<BinaryOp::maximum, A>{al});
      return;
    case BinaryOp::minimum:
      fn(BinaryForward<BinaryOp::minimum, A>{al});
      return;
  }
}

template <int Which, class A, class Fn>
void visit_binary_grad_of(BinaryOp op, double alpha, Fn&& fn) {
  const A al = static_cast<A>(alpha);
  switch (op) {
    case BinaryOp::add:
      fn(BinaryGrad<BinaryOp::add, Which, A>{al});
      return;
    case BinaryOp::sub:
      fn(BinaryGrad<BinaryOp::sub, Which, A>{al});
      return;
    case BinaryOp::mul:
      fn(BinaryGrad<BinaryOp::mul, Which, A>{al});
      return;
    case BinaryOp::div:
      fn(BinaryGrad<BinaryOp::div, Which, A>{al});
      return;
    case BinaryOp::pow:
      fn(BinaryGrad<BinaryOp::pow, Which, A>{al});
      return;
    case BinaryOp::maximum:
      fn(BinaryGrad<BinaryOp::maximum, Which, A>{al});
      return;
    case BinaryOp::minimum:
      fn(BinaryGrad<BinaryOp::minimum, Which, A>{al});
      return;
  }
}

// Calls fn(functor) with BinaryGrad<op, which, A>{alpha}.
template <class A, class Fn>
void visit_binary_grad(BinaryOp op, int which, double alpha, Fn&& fn) {
  if (which == 0) {
    visit_binary_grad_of<0, A>(op, alpha, fn);
  } else {
    visit_binary_grad_of<1, A>(op, alpha, fn);
  }
}

}  // namespace liftoff
