#include "ops/where/where.h"

#include "ops/cast/cast.h"
#include "ops/common/broadcast.h"
#include "ops/where/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

void check_tensor(const char* op, const char* what, const Tensor& t, const Device& device) {
  LIFTOFF_CHECK(t.defined(), ValueError, op, ": ", what, " is an undefined tensor");
  LIFTOFF_CHECK(t.device() == device, DeviceError, op, ": ", what, " ", shape_str(t.shape()), " is on ",
                t.device().str(), ", the condition on ", device.str());
  LIFTOFF_CHECK(t.is_cuda() || (t.dtype() != DType::f16 && t.dtype() != DType::bf16), DTypeError, op, ": ",
                what, " ", shape_str(t.shape()), " has dtype ", dtype_name(t.dtype()),
                " on the CPU (f32, f64, i32, i64, u8, bool there)");
}

// cond ? a : b over the broadcast shape, no autograd.
Tensor select(const char* op, const Tensor& cond, const ElementOperand& a, const ElementOperand& b,
              DType dtype) {
  Shape shape = cond.shape();
  for (const ElementOperand* o : {&a, &b}) {
    if (o->tensor.defined()) shape = broadcast_shapes(shape, o->tensor.shape(), op);
  }
  const MemoryFormat format = elementwise_format(shape, {a.tensor, b.tensor, cond});
  const ElementwisePlan plan = make_elementwise_plan(op, shape, format, {cond, a.tensor, b.tensor});
  Tensor y = Tensor::empty(shape, dtype, cond.device(), format);
  LIFTOFF_DISPATCH(cond.device(), where_forward, plan, cond, a, b, y);
  return y;
}

// The shape-checked, promoted where; a or b may be constants.
Tensor where_impl(const Tensor& cond, const ElementOperand& a_in, const ElementOperand& b_in) {
  const char* op = "where";
  LIFTOFF_CHECK(cond.defined(), ValueError, "where: condition is an undefined tensor");
  LIFTOFF_CHECK(cond.dtype() == DType::b8, DTypeError, "where: condition ", shape_str(cond.shape()),
                " has dtype ", dtype_name(cond.dtype()),
                ", expected bool (a comparison's result, or .to(bool))");
  if (a_in.tensor.defined()) check_tensor(op, "a", a_in.tensor, cond.device());
  if (b_in.tensor.defined()) check_tensor(op, "b", b_in.tensor, cond.device());
  try {
    Shape shape = cond.shape();
    for (const ElementOperand* o : {&a_in, &b_in}) {
      if (o->tensor.defined()) shape = broadcast_shapes(shape, o->tensor.shape(), op);
    }
  } catch (const ShapeError&) {
    auto str = [](const ElementOperand& o) {
      return o.tensor.defined() ? shape_str(o.tensor.shape()) : "scalar";
    };
    throw ShapeError(str_cat("where: condition ", shape_str(cond.shape()), ", a ", str(a_in), " and b ",
                             str(b_in),
                             " do not broadcast together (sizes must match or be 1, aligned from the last "
                             "dimension)"));
  }
  DType dtype;
  if (a_in.tensor.defined() && b_in.tensor.defined()) {
    const DType da = a_in.tensor.dtype();
    const DType db = b_in.tensor.dtype();
    LIFTOFF_CHECK(da == db || (is_floating(da) && is_floating(db)), DTypeError, "where: a has dtype ",
                  dtype_name(da), " and b ", dtype_name(db), " (shapes ", shape_str(a_in.tensor.shape()),
                  " and ", shape_str(b_in.tensor.shape()), "); cast one");
    dtype = da == db ? da : promote_floating(da, db, op);
  } else {
    dtype = (a_in.tensor.defined() ? a_in.tensor : b_in.tensor).dtype();
  }
  auto promoted = [dtype](const ElementOperand& o) {
    if (!o.tensor.defined() || o.tensor.dtype() == dtype) return o;
    return ElementOperand{cast(o.tensor, dtype), o.value};
  };
  const ElementOperand a = promoted(a_in);
  const ElementOperand b = promoted(b_in);
  Tensor y = select(op, cond.detach(), a, b, dtype);
  std::vector<Tensor> inputs;
  std::vector<int> which;
  for (int k = 0; k < 2; ++k) {
    const Tensor& t = k == 0 ? a.tensor : b.tensor;
    if (t.defined()) {
      inputs.push_back(t);
      which.push_back(k);
    }
  }
  if (is_floating(dtype) && should_record(inputs)) {
    const Shape a_shape = a.tensor.defined() ? a.tensor.shape() : Shape{};
    const Shape b_shape = b.tensor.defined() ? b.tensor.shape() : Shape{};
    record(y, op, inputs,
           [c = cond.detach(), which, a_shape, b_shape](const Tensor& gy, const NeedsGrad& needs) {
             std::vector<Tensor> grads;
             for (size_t i = 0; i < which.size(); ++i) {
               if (!needs[i]) {
                 grads.emplace_back();
                 continue;
               }
               const ElementOperand g{gy, 0.0};
               const ElementOperand zero{Tensor(), 0.0};
               const Tensor full = which[i] == 0 ? select("where backward", c, g, zero, gy.dtype())
                                                 : select("where backward", c, zero, g, gy.dtype());
               grads.push_back(sum_to_shape(full, which[i] == 0 ? a_shape : b_shape));
             }
             return grads;
           });
  }
  return y;
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  LIFTOFF_CHECK(a.defined() && b.defined(), ValueError, "where: a and b must be defined tensors");
  return where_impl(cond, {a, 0.0}, {b, 0.0});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  LIFTOFF_CHECK(a.defined(), ValueError, "where: a is an undefined tensor");
  return where_impl(cond, {a, 0.0}, {Tensor(), b});
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  LIFTOFF_CHECK(b.defined(), ValueError, "where: b is an undefined tensor");
  return where_impl(cond, {Tensor(), a}, {b, 0.0});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  LIFTOFF_CHECK(x.defined() && mask.defined(), ValueError, "masked_fill: x and mask must be defined tensors");
  LIFTOFF_CHECK(broadcasts_to(mask.shape(), x.shape()), ShapeError, "masked_fill: mask of shape ",
                shape_str(mask.shape()), " does not broadcast to x of shape ", shape_str(x.shape()),
                " (the mask's sizes must match x's or be 1, aligned from the last dimension)");
  return where_impl(mask, {Tensor(), value}, {x, 0.0});
}

}  // namespace liftoff
