#pragma once
#include "ops/scale/scale.h"  // operator*(Tensor, double) and operator*(double, Tensor)
#include "ops/unary/unary.h"  // neg and unary -
#include "runtime/tensor.h"

namespace liftoff {

// Broadcasting binary arithmetic, as PyTorch: shapes broadcast with NumPy rules (ShapeError naming the op and
// both shapes otherwise), any strides (broadcast and non-contiguous operands are read in place, no copies).
// Dtypes: floating only (f32/f64 on the CPU, also f16/bf16 on CUDA, computed in f32); mixed floating dtypes
// promote to the wider one (bf16 + f32 -> f32, f16 + bf16 -> f32), differentiably. A double scalar operand
// keeps the tensor's dtype (x_bf16 * 2.0 is bf16). Operands must share a device (DeviceError).
// Layout: the result takes the layout of the first operand with the result's shape (a channels-last CUDA
// activation stays channels-last), contiguous otherwise; the CPU is always contiguous.
// Backward: each operand's gradient is reduced to its own shape with sum_to_shape (ops/common/broadcast.h).

// a + alpha * b (torch.add). Backward: ga = gy, gb = alpha * gy.
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor add(const Tensor& a, double b, double alpha = 1.0);
// a - alpha * b (torch.sub). Backward: ga = gy, gb = -alpha * gy.
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, double b, double alpha = 1.0);
// b - alpha * a (torch.rsub: the scalar minus the tensor).
Tensor rsub(const Tensor& a, double b, double alpha = 1.0);
// a * b. Backward: ga = gy * b, gb = gy * a.
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
// a / b (true division; x / 0 is inf or NaN as IEEE). Backward: ga = gy / b, gb = -gy * a / b^2.
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
// b / a for a scalar b (torch.reciprocal(a) * b).
Tensor rdiv(double b, const Tensor& a);
// a ^ b (torch.pow). Backward: ga = gy * b * a^(b-1) (0 where b == 0), gb = gy * a^b * log(a) (0 where
// a == 0 and b >= 0), as PyTorch. Under autocast, f16/bf16 CUDA operands compute and return f32 (PyTorch's
// fp32 list).
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
// Elementwise max / min (torch.maximum / torch.minimum); NaN propagates. Backward: the gradient goes to the
// larger (smaller) operand, split in half where they are equal, as PyTorch.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// neg(x) and unary -x are in ops/unary (included above).

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
inline Tensor operator+(double a, const Tensor& b) {
  return add(b, a);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator-(const Tensor& a, double b) {
  return sub(a, b);
}
inline Tensor operator-(double a, const Tensor& b) {
  return rsub(b, a);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator/(const Tensor& a, double b) {
  return div(a, b);
}
inline Tensor operator/(double a, const Tensor& b) {
  return rdiv(a, b);
}

}  // namespace liftoff
