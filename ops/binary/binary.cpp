#include "ops/binary/binary.h"

#include "ops/batch_norm2d/fusion.h"
#include "ops/binary/kernels.h"
#include "ops/cast/cast.h"
#include "ops/common/broadcast.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
    case BinaryOp::pow:
      return "pow";
    case BinaryOp::maximum:
      return "maximum";
    case BinaryOp::minimum:
      return "minimum";
  }
  return "binary op";
}

void check_operand(const char* op, const Tensor& t) {
  LIFTOFF_CHECK(t.defined(), ValueError, op, ": operand is an undefined tensor");
  LIFTOFF_CHECK(is_floating(t.dtype()), DTypeError, op, ": operand ", shape_str(t.shape()), " has dtype ",
                dtype_name(t.dtype()), ", expected a floating type (f32, f64, f16, bf16)");
  LIFTOFF_CHECK(t.is_cuda() || t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError, op,
                ": operand ", shape_str(t.shape()), " has dtype ", dtype_name(t.dtype()),
                "; the CPU computes f32 and f64 (cast first, or run on CUDA)");
}

// The dtype the op computes in: the promoted operand dtype, f32 for pow of half CUDA operands under autocast.
DType compute_dtype(BinaryOp op, DType promoted, const Device& device) {
  const bool half = promoted == DType::f16 || promoted == DType::bf16;
  return op == BinaryOp::pow && half && device.is_cuda() && autocast_enabled() ? DType::f32 : promoted;
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : cast(t, dtype);
}

// The gradient of operand `which` over the result's shape, before sum_to_shape. Operands are the saved
// (detached) tensors or constants.
Tensor operand_grad(BinaryOp op, int which, double alpha, const Tensor& gy, const ElementOperand& a,
                    const ElementOperand& b) {
  const bool identity =
      (op == BinaryOp::add && (which == 0 || alpha == 1.0)) || (op == BinaryOp::sub && which == 0);
  if (identity) return gy;
  const bool reads = grad_reads_operands(op);
  const ElementOperand ga = reads ? a : ElementOperand{};
  const ElementOperand gb = reads ? b : ElementOperand{};
  const Shape& shape = gy.shape();
  const MemoryFormat format = elementwise_format(shape, {gy, ga.tensor, gb.tensor});
  const ElementwisePlan plan = make_elementwise_plan(op_name(op), shape, format, {gy, ga.tensor, gb.tensor});
  Tensor g = Tensor::empty(shape, gy.dtype(), gy.device(), format);
  LIFTOFF_DISPATCH(gy.device(), binary_backward, op, which, alpha, plan, gy, ga, gb, g);
  return g;
}

// Runs op over two operands (at least one a tensor; both promoted to the compute dtype and on one device).
Tensor run_binary(BinaryOp op, double alpha, const ElementOperand& a, const ElementOperand& b) {
  const char* name = op_name(op);
  const Tensor& first = a.tensor.defined() ? a.tensor : b.tensor;
  const Shape shape = a.tensor.defined() && b.tensor.defined()
                          ? broadcast_shapes(a.tensor.shape(), b.tensor.shape(), name)
                          : first.shape();
  const MemoryFormat format = elementwise_format(shape, {a.tensor, b.tensor});
  const ElementwisePlan plan = make_elementwise_plan(name, shape, format, {a.tensor, b.tensor});
  Tensor y = Tensor::empty(shape, first.dtype(), first.device(), format);
  LIFTOFF_DISPATCH(first.device(), binary_forward, op, alpha, plan, a, b, y);
  if (should_record({a.tensor, b.tensor})) {
    const bool reads = grad_reads_operands(op);
    auto saved = [reads](const ElementOperand& o) {
      return ElementOperand{reads && o.tensor.defined() ? o.tensor.detach() : Tensor(), o.value};
    };
    std::vector<Tensor> inputs;
    std::vector<int> which;  // operand index of each recorded input
    for (int k = 0; k < 2; ++k) {
      const Tensor& t = k == 0 ? a.tensor : b.tensor;
      if (!t.defined()) continue;
      inputs.push_back(t);
      which.push_back(k);
    }
    const Shape a_shape = a.tensor.defined() ? a.tensor.shape() : Shape{};
    const Shape b_shape = b.tensor.defined() ? b.tensor.shape() : Shape{};
    record(
        y, name, inputs,
        [op, alpha, sa = saved(a), sb = saved(b), a_shape, b_shape, which](const Tensor& gy,
                                                                           const NeedsGrad& needs) {
          std::vector<Tensor> grads;
          for (size_t i = 0; i < which.size(); ++i) {
            if (!needs[i]) {
              grads.emplace_back();
              continue;
            }
            const int w = which[i];
            grads.push_back(sum_to_shape(operand_grad(op, w, alpha, gy, sa, sb), w == 0 ? a_shape : b_shape));
          }
          return grads;
        });
  }
  return y;
}

Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, double alpha) {
  const char* name = op_name(op);
  check_operand(name, a_in);
  check_operand(name, b_in);
  LIFTOFF_CHECK(a_in.device() == b_in.device(), DeviceError, name, ": operands on ", a_in.device().str(),
                " and ", b_in.device().str(), " (shapes ", shape_str(a_in.shape()), " and ",
                shape_str(b_in.shape()), "); move one with .to(device)");
  broadcast_shapes(a_in.shape(), b_in.shape(), name);  // shape errors before any work
  const DType dtype = compute_dtype(op, promote_floating(a_in.dtype(), b_in.dtype(), name), a_in.device());
  return run_binary(op, alpha, {as_dtype(a_in, dtype), 0.0}, {as_dtype(b_in, dtype), 0.0});
}

// op(x, s), or op(s, x) when scalar_first.
Tensor binary_scalar(BinaryOp op, const Tensor& x_in, double s, bool scalar_first, double alpha) {
  check_operand(op_name(op), x_in);
  const Tensor x = as_dtype(x_in, compute_dtype(op, x_in.dtype(), x_in.device()));
  const ElementOperand tensor{x, 0.0};
  const ElementOperand constant{Tensor(), s};
  return scalar_first ? run_binary(op, alpha, constant, tensor) : run_binary(op, alpha, tensor, constant);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  // batch_norm2d(x) + residual on CUDA: folded into the normalize pass (ops/batch_norm2d/fusion.h).
  if (Tensor folded = fold_add_into_batch_norm(a, b, alpha); folded.defined()) return folded;
  return binary(BinaryOp::add, a, b, alpha);
}
Tensor add(const Tensor& a, double b, double alpha) {
  return binary_scalar(BinaryOp::add, a, b * alpha, false, 1.0);
}
Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return binary(BinaryOp::sub, a, b, alpha);
}
Tensor sub(const Tensor& a, double b, double alpha) {
  return binary_scalar(BinaryOp::sub, a, b * alpha, false, 1.0);
}
Tensor rsub(const Tensor& a, double b, double alpha) {
  return binary_scalar(BinaryOp::sub, a, b, true, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::mul, a, b, 1.0);
}
Tensor mul(const Tensor& a, double b) {
  return binary_scalar(BinaryOp::mul, a, b, false, 1.0);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::div, a, b, 1.0);
}
Tensor div(const Tensor& a, double b) {
  return binary_scalar(BinaryOp::div, a, b, false, 1.0);
}
Tensor rdiv(double b, const Tensor& a) {
  return binary_scalar(BinaryOp::div, a, b, true, 1.0);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::pow, a, b, 1.0);
}
Tensor pow(const Tensor& a, double exponent) {
  return binary_scalar(BinaryOp::pow, a, exponent, false, 1.0);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::maximum, a, b, 1.0);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::minimum, a, b, 1.0);
}
}  // namespace liftoff
