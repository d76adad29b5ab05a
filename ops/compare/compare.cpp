#include "ops/compare/compare.h"

#include "ops/common/broadcast.h"
#include "ops/compare/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

const char* op_name(CompareOp op) {
  switch (op) {
    case CompareOp::eq:
      return "eq";
    case CompareOp::ne:
      return "ne";
    case CompareOp::lt:
      return "lt";
    case CompareOp::le:
      return "le";
    case CompareOp::gt:
      return "gt";
    case CompareOp::ge:
      return "ge";
  }
  return "compare";
}

void check_operand(const char* op, const Tensor& t) {
  LIFTOFF_CHECK(t.defined(), ValueError, op, ": operand is an undefined tensor");
  LIFTOFF_CHECK(t.is_cuda() || (t.dtype() != DType::f16 && t.dtype() != DType::bf16), DTypeError, op,
                ": operand ", shape_str(t.shape()), " has dtype ", dtype_name(t.dtype()),
                " on the CPU (f32, f64, i32, i64, u8, bool there; cast first, or run on CUDA)");
}

// PyTorch's promotion for a comparison: the wider floating dtype, a floating dtype over an integer one,
// i64 for two different integer (or bool) dtypes.
DType common_dtype(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) && is_floating(b)) return promote_floating(a, b, "compare");
  if (is_floating(a)) return a;
  if (is_floating(b)) return b;
  return DType::i64;
}

Tensor run_compare(CompareOp op, const Tensor& a, const ElementOperand& b) {
  const Shape shape =
      b.tensor.defined() ? broadcast_shapes(a.shape(), b.tensor.shape(), op_name(op)) : a.shape();
  const MemoryFormat format = elementwise_format(shape, {a, b.tensor});
  const ElementwisePlan plan = make_elementwise_plan(op_name(op), shape, format, {a, b.tensor});
  Tensor y = Tensor::empty(shape, DType::b8, a.device(), format);
  LIFTOFF_DISPATCH(a.device(), compare_forward, op, plan, a.detach(), b, y);
  return y;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_operand(name, a);
  check_operand(name, b);
  LIFTOFF_CHECK(a.device() == b.device(), DeviceError, name, ": operands on ", a.device().str(), " and ",
                b.device().str(), " (shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()), ")");
  broadcast_shapes(a.shape(), b.shape(), name);
  const DType dtype = common_dtype(a.dtype(), b.dtype());
  const Tensor pa = a.detach().to(dtype);
  const Tensor pb = b.detach().to(dtype);
  return run_compare(op, pa, {pb, 0.0});
}

Tensor compare(CompareOp op, const Tensor& a, double b) {
  check_operand(op_name(op), a);
  return run_compare(op, a, {Tensor(), b});
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::eq, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::ne, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::lt, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::le, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::gt, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::ge, a, b);
}
Tensor eq(const Tensor& a, double b) {
  return compare(CompareOp::eq, a, b);
}
Tensor ne(const Tensor& a, double b) {
  return compare(CompareOp::ne, a, b);
}
Tensor lt(const Tensor& a, double b) {
  return compare(CompareOp::lt, a, b);
}
Tensor le(const Tensor& a, double b) {
  return compare(CompareOp::le, a, b);
}
Tensor gt(const Tensor& a, double b) {
  return compare(CompareOp::gt, a, b);
}
Tensor ge(const Tensor& a, double b) {
  return compare(CompareOp::ge, a, b);
}

Tensor logical_not(const Tensor& x) {
  return compare(CompareOp::eq, x, 0.0);
}

Tensor operator~(const Tensor& mask) {
  LIFTOFF_CHECK(mask.defined() && mask.dtype() == DType::b8, DTypeError,
                "operator~: expected a bool mask, got ",
                mask.defined() ? dtype_name(mask.dtype()) : "an undefined tensor",
                " (use logical_not for other dtypes)");
  return logical_not(mask);
}

}  // namespace liftoff
