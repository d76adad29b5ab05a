// The unary elementwise family as one table of functors, shared by the CPU and CUDA kernels: each op is a
// struct with the forward value f(x) and the derivative dy/dx, computed from whichever tensor backward saves
// (the input, or the output where that is cheaper, as PyTorch does: exp, sqrt, rsqrt, tanh, sigmoid). T is
// the compute type: float or double (16-bit storage computes in float). Adding an op: a functor here, an
// enumerator in UnaryOp, a case in visit_unary, a front function in unary.cpp.
#pragma once
#include <cmath>

#include "runtime/macros.h"

namespace liftoff::unary {

// clang-format off: the table reads best one line per function.

enum class Saved { none, input, output };

enum class UnaryOp {
  neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu6, leaky_relu, gelu, gelu_tanh, silu, softplus,
  hardsigmoid, hardswish, elu, square, sin, cos, clamp
};

// The scalar arguments of the ops that take any (unused fields are ignored).
struct UnaryParams {
  double negative_slope = 0.01;  // leaky_relu
  double alpha = 1.0;            // elu
  double beta = 1.0;             // softplus
  double threshold = 20.0;       // softplus
  double min = -HUGE_VAL;        // clamp (an absent bound is infinite)
  double max = HUGE_VAL;         // clamp
};

struct Neg {
  static constexpr Saved kSaved = Saved::none;
  template <class T> LIFTOFF_HD T operator()(T x) const { return -x; }
  template <class T> LIFTOFF_HD T grad(T) const { return T(-1); }
};

struct Abs {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::abs(x); }
  // sign(x), 0 at 0 (PyTorch's sgn).
  template <class T> LIFTOFF_HD T grad(T x) const { return T(x > T(0)) - T(x < T(0)); }  // vectorises (ReLU6)
};

struct Exp {
  static constexpr Saved kSaved = Saved::output;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::exp(x); }
  template <class T> LIFTOFF_HD T grad(T y) const { return y; }
};

struct Log {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::log(x); }
  template <class T> LIFTOFF_HD T grad(T x) const { return T(1) / x; }
};

struct Sqrt {
  static constexpr Saved kSaved = Saved::output;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::sqrt(x); }
  template <class T> LIFTOFF_HD T grad(T y) const { return T(0.5) / y; }
};

struct Rsqrt {
  static constexpr Saved kSaved = Saved::output;
  template <class T> LIFTOFF_HD T operator()(T x) const { return T(1) / std::sqrt(x); }
  template <class T> LIFTOFF_HD T grad(T y) const { return T(-0.5) * y * y * y; }
};

struct Tanh {
  static constexpr Saved kSaved = Saved::output;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::tanh(x); }
  template <class T> LIFTOFF_HD T grad(T y) const { return T(1) - y * y; }
};

struct Sigmoid {
  static constexpr Saved kSaved = Saved::output;
  template <class T> LIFTOFF_HD T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
  template <class T> LIFTOFF_HD T grad(T y) const { return y * (T(1) - y); }
};

// hardtanh(x, 0, 6): the gradient is 0 at both kinks, as PyTorch's hardtanh_backward.
struct Relu6 {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return x < T(0) ? T(0) : (x > T(6) ? T(6) : x); }
  // Products of 0/1 values, not a select of constants: GCC vectorises only this form (the select kept ReLU6's
  // backward scalar and mispredicting, 18% of MobileNetV2's CPU step).
  template <class T> LIFTOFF_HD T grad(T x) const { return T(x > T(0)) * T(x < T(6)); }
};

struct LeakyRelu {
  static constexpr Saved kSaved = Saved::input;
  double slope;
  template <class T> LIFTOFF_HD T operator()(T x) const { return x > T(0) ? x : x * T(slope); }
  // 1 or slope exactly, written so that the CPU loop vectorises (see ReLU6).
  template <class T> LIFTOFF_HD T grad(T x) const { return T(x > T(0)) + T(!(x > T(0))) * T(slope); }
};

// x * Phi(x), Phi the standard normal CDF.
struct Gelu {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
  template <class T> LIFTOFF_HD T grad(T x) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
    return cdf + x * pdf;
  }
};

// gelu (erf form) for 16-bit storage: Phi(x) from erfc(|x| / sqrt 2) = 2^p(z), p(z) = z q(z) with q of degree
// 9 (a Chebyshev fit of log2 erfc(z) / z on [0, 10.5]; relative error < 5e-5 in f32, against the 2^-9 that bf16 keeps and the 2^-11
// of f16). No branch and no 1 + erf cancellation in the left tail; ~20 instructions a value instead of erff's
// ~30, which kept 16-bit gelu compute-bound. f32/f64 keep Gelu (erf) above.
struct GeluHalf {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD static T cdf(T x) {
    const T scaled = std::fabs(x) * T(0.70710678118654752440);
    const T z = scaled < T(10.5) ? scaled : T(10.5);  // 2^p(10.5) = 0 in f32; a NaN lands here, stays in x
    T q = T(1.566193093e-09);
    q = q * z + T(-1.108024913e-07);
    q = q * z + T(3.454017185e-06);
    q = q * z + T(-6.272645575e-05);
    q = q * z + T(7.406328798e-04);
    q = q * z + T(-6.028652557e-03);
    q = q * z + T(3.521059053e-02);
    q = q * z + T(-1.533114261e-01);
    q = q * z + T(-9.170321159e-01);
    q = q * z + T(-1.627979443e+00);
    const T p = q * z;  // log2 erfc(z), exactly 0 at 0 (Phi(0) = 1/2)
    const T erfc = std::exp2(p);
    return x >= T(0) ? T(1) - T(0.5) * erfc : T(0.5) * erfc;
  }
  template <class T> LIFTOFF_HD T operator()(T x) const { return x * cdf(x); }
  template <class T> LIFTOFF_HD T grad(T x) const {
    // pdf = exp(-x^2 / 2) / sqrt(2 pi), through exp2 (-0.5 log2(e) x^2).
    return cdf(x) + x * std::exp2(T(-0.72134752044448170368) * x * x) * T(0.39894228040143267794);
  }
};

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gelu(approximate="tanh").
struct GeluTanh {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
  }
  template <class T> LIFTOFF_HD T grad(T x) const {
    const T k = T(0.79788456080286535588);
    const T t = std::tanh(k * (x + T(0.044715) * x * x * x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x * x);
  }
};

struct Silu {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return x / (T(1) + std::exp(-x)); }
  template <class T> LIFTOFF_HD T grad(T x) const {
    const T s = T(1) / (T(1) + std::exp(-x));
    return s * (T(1) + x * (T(1) - s));
  }
};

// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (for stability, as PyTorch).
struct Softplus {
  static constexpr Saved kSaved = Saved::input;
  double beta;
  double threshold;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    const T bx = x * T(beta);
    return bx > T(threshold) ? x : std::log1p(std::exp(bx)) / T(beta);
  }
  template <class T> LIFTOFF_HD T grad(T x) const {
    const T bx = x * T(beta);
    return bx > T(threshold) ? T(1) : T(1) / (T(1) + std::exp(-bx));
  }
};

// relu6(x + 3) / 6; gradient 1/6 strictly inside (-3, 3), as PyTorch.
struct Hardsigmoid {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    return x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : x / T(6) + T(0.5));
  }
  template <class T> LIFTOFF_HD T grad(T x) const { return T(x > T(-3)) * T(x < T(3)) * (T(1) / T(6)); }
};

// x * relu6(x + 3) / 6; at the kinks the gradient is PyTorch's: x/3 + 1/2 on [-3, 3].
struct Hardswish {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    return x <= T(-3) ? T(0) : (x >= T(3) ? x : x * (x + T(3)) / T(6));
  }
  template <class T> LIFTOFF_HD T grad(T x) const {
    return x < T(-3) ? T(0) : (x <= T(3) ? x / T(3) + T(0.5) : T(1));
  }
};

struct Elu {
  static constexpr Saved kSaved = Saved::input;
  double alpha;
  template <class T> LIFTOFF_HD T operator()(T x) const { return x > T(0) ? x : T(alpha) * std::expm1(x); }
  template <class T> LIFTOFF_HD T grad(T x) const { return x > T(0) ? T(1) : T(alpha) * std::exp(x); }
};

struct Square {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return x * x; }
  template <class T> LIFTOFF_HD T grad(T x) const { return T(2) * x; }
};

struct Sin {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::sin(x); }
  template <class T> LIFTOFF_HD T grad(T x) const { return std::cos(x); }
};

struct Cos {
  static constexpr Saved kSaved = Saved::input;
  template <class T> LIFTOFF_HD T operator()(T x) const { return std::cos(x); }
  template <class T> LIFTOFF_HD T grad(T x) const { return -std::sin(x); }
};

// min(max(x, lo), hi) (so lo > hi gives hi everywhere, and NaN stays NaN, as PyTorch). The gradient passes
// where lo <= x <= hi, bounds included, as PyTorch's clamp_backward.
struct Clamp {
  static constexpr Saved kSaved = Saved::input;
  double lo;
  double hi;
  template <class T> LIFTOFF_HD T operator()(T x) const {
    const T a = x < T(lo) ? T(lo) : x;
    return a > T(hi) ? T(hi) : a;
  }
  template <class T> LIFTOFF_HD T grad(T x) const { return T(x >= T(lo)) * T(x <= T(hi)); }
};

// Calls fn(functor) with the functor of `op`, its parameters taken from p: the one switch that maps the
// runtime op to a compile-time functor type (each kernel is instantiated per functor). Host only.
template <class Fn>
auto visit_unary(UnaryOp op, const UnaryParams& p, Fn&& fn) {
  switch (op) {
    case UnaryOp::neg: return fn(Neg{});
    case UnaryOp::abs: return fn(Abs{});
    case UnaryOp::exp: return fn(Exp{});
    case UnaryOp::log: return fn(Log{});
    case UnaryOp::sqrt: return fn(Sqrt{});
    case UnaryOp::rsqrt: return fn(Rsqrt{});
    case UnaryOp::tanh: return fn(Tanh{});
    case UnaryOp::sigmoid: return fn(Sigmoid{});
    case UnaryOp::relu6: return fn(Relu6{});
    case UnaryOp::leaky_relu: return fn(LeakyRelu{p.negative_slope});
    case UnaryOp::gelu: return fn(Gelu{});
    case UnaryOp::gelu_tanh: return fn(GeluTanh{});
    case UnaryOp::silu: return fn(Silu{});
    case UnaryOp::softplus: return fn(Softplus{p.beta, p.threshold});
    case UnaryOp::hardsigmoid: return fn(Hardsigmoid{});
    case UnaryOp::hardswish: return fn(Hardswish{});
    case UnaryOp::elu: return fn(Elu{p.alpha});
    case UnaryOp::square: return fn(Square{});
    case UnaryOp::sin: return fn(Sin{});
    case UnaryOp::cos: return fn(Cos{});
    case UnaryOp::clamp: break;
  }
  return fn(Clamp{p.min, p.max});
}
// clang-format on

}  // namespace liftoff::unary
