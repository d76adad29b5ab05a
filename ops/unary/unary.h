// Unary elementwise ops and activations, with PyTorch's names, defaults and semantics (torch.<name>,
// torch.nn.functional.<name> for the activations).
//
// Every function: y has x's shape (any rank, 0-d and empty included) and dtype. Floating dtypes only: f32/f64
// on the CPU; f32, f64, f16, bf16 on CUDA (16-bit types compute in f32). Any input strides: a non-dense input
// is first made contiguous; a channels-last CUDA input gives a channels-last output (and gradient). An
// integer input, or f16/bf16 on the CPU, throws DTypeError naming the op. Differences from PyTorch: no
// integer inputs (PyTorch allows neg/abs/square/clamp on integers), no in-place variants.
//
// Autocast: under an AutocastGuard, exp, log, rsqrt and softplus (PyTorch's CUDA "autocast to float32" list)
// upcast an f16/bf16 CUDA input to f32 and return f32; the other ops run in the input's dtype.
//
// Backward (gy the output gradient, y the output; * elementwise). Ops marked [y] save their output for
// backward, the others their input (neg saves nothing), as PyTorch:
//   neg(x) = -x                          gx = -gy
//   abs(x) = |x|                         gx = gy * sign(x)              (0 at x = 0)
//   exp(x)                               gx = gy * y                    [y]
//   log(x)                               gx = gy / x
//   sqrt(x)                              gx = gy / (2 y)                [y]
//   rsqrt(x) = 1 / sqrt(x)               gx = -gy * y^3 / 2             [y]
//   tanh(x)                              gx = gy * (1 - y^2)            [y]
//   sigmoid(x) = 1 / (1 + exp(-x))       gx = gy * y * (1 - y)          [y]
//   relu6(x) = min(max(x, 0), 6)         gx = gy where 0 < x < 6, else 0 (0 at both kinks, as hardtanh)
//   leaky_relu(x, s) = x > 0 ? x : s x   gx = gy where x > 0, else s gy
//   gelu(x, "none") = x Phi(x)           gx = gy * (Phi(x) + x phi(x)), Phi/phi the normal CDF/density
//   gelu(x, "tanh") = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   gx = gy * d/dx of that
//   silu(x) = x sigmoid(x)               gx = gy * s (1 + x (1 - s)), s = sigmoid(x)
//   softplus(x, b, t) = log(1 + exp(b x)) / b, or x where b x > t     gx = gy * sigmoid(b x), or gy
//   hardsigmoid(x) = relu6(x + 3) / 6    gx = gy / 6 where -3 < x < 3, else 0
//   hardswish(x) = x relu6(x + 3) / 6    gx = 0 for x < -3, gy (x/3 + 1/2) on [-3, 3], gy for x > 3
//   elu(x, a) = x > 0 ? x : a (exp(x) - 1)   gx = gy where x > 0, else gy a exp(x)
//   square(x) = x^2                      gx = 2 gy x
//   sin(x), cos(x)                       gx = gy cos(x), -gy sin(x)
//   clamp(x, lo, hi) = min(max(x, lo), hi)   gx = gy where lo <= x <= hi (bounds included), else 0
#pragma once
#include <optional>
#include <string>

#include "runtime/tensor.h"

namespace liftoff {

Tensor neg(const Tensor& x);
inline Tensor operator-(const Tensor& x) {
  return neg(x);
}
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// approximate: "none" (exact, erf) or "tanh"; anything else throws ValueError.
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
// beta must be nonzero (ValueError).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
// At least one bound must be given (ValueError otherwise, as PyTorch); min > max gives max everywhere; NaN
// inputs stay NaN.
Tensor clamp(const Tensor& x, std::optional<double> min = std::nullopt,
             std::optional<double> max = std::nullopt);

}  // namespace liftoff
