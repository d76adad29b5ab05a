#include "ops/unary/unary.h"

#include "ops/batch_norm2d/fusion.h"
#include "ops/cast/cast.h"
#include "ops/common/layout.h"
#include "ops/unary/kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

using unary::Saved;
using unary::UnaryOp;
using unary::UnaryParams;

void check_input(const char* name, const Tensor& x) {
  LIFTOFF_CHECK(x.defined(), ValueError, name, ": input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, name, ": input of shape ", shape_str(x.shape()),
                " has dtype ", dtype_name(x.dtype()),
                "; it needs a floating dtype (convert with cast(x, f32))");
  LIFTOFF_CHECK(x.is_cuda() || x.dtype() == DType::f32 || x.dtype() == DType::f64, DTypeError, name,
                ": dtype ", dtype_name(x.dtype()),
                " is not supported on the CPU (f32, f64); cast to f32 or "
                "move the tensor to CUDA");
}

// What autocast does to an op's input: nothing, or PyTorch's CUDA "float32" rule (a half input is upcast, so
// the result is f32).
enum class Autocast { keep, f32 };

Tensor apply_autocast(const Tensor& x, Autocast rule) {
  const bool half = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  return rule == Autocast::f32 && x.is_cuda() && half && autocast_enabled() ? cast(x, DType::f32) : x;
}

// The whole front of every op of the family: checks, layout, forward, and the backward from the saved input
// or output.
Tensor unary_op(const char* name, UnaryOp op, const Tensor& input, const UnaryParams& params = {},
                Autocast rule = Autocast::keep) {
  check_input(name, input);
  const Tensor in = apply_autocast(input, rule);
  // Elementwise over the storage: a channels-last CUDA input stays channels-last (output and gradient).
  const MemoryFormat format = op_memory_format(in);
  const Tensor x = in.contiguous(format);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device(), format);
  LIFTOFF_DISPATCH(x.device(), unary_forward, op, params, x, y);
  if (should_record({x})) {
    const Saved kind = unary::visit_unary(op, params, [](auto f) { return decltype(f)::kSaved; });
    const Tensor saved = kind == Saved::input ? x.detach() : (kind == Saved::output ? y.detach() : Tensor());
    record(y, name, {x}, [op, params, saved, format](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous(format);
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device(), format);
      const Tensor& s = saved.defined() ? saved : grad_y;
      LIFTOFF_DISPATCH(grad_y.device(), unary_backward, op, params, s, grad_y, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace

Tensor neg(const Tensor& x) {
  return unary_op("neg", UnaryOp::neg, x);
}
Tensor abs(const Tensor& x) {
  return unary_op("abs", UnaryOp::abs, x);
}
Tensor exp(const Tensor& x) {
  return unary_op("exp", UnaryOp::exp, x, {}, Autocast::f32);
}
Tensor log(const Tensor& x) {
  return unary_op("log", UnaryOp::log, x, {}, Autocast::f32);
}
Tensor sqrt(const Tensor& x) {
  return unary_op("sqrt", UnaryOp::sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary_op("rsqrt", UnaryOp::rsqrt, x, {}, Autocast::f32);
}
Tensor tanh(const Tensor& x) {
  return unary_op("tanh", UnaryOp::tanh, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", UnaryOp::sigmoid, x);
}
Tensor relu6(const Tensor& x) {
  // A pending CUDA batch-norm output takes the ReLU6 into its normalize pass (ops/batch_norm2d/fusion.h).
  if (Tensor folded = fold_relu6_into_batch_norm(x); folded.defined()) return folded;
  return unary_op("relu6", UnaryOp::relu6, x);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  UnaryParams params;
  params.negative_slope = negative_slope;
  return unary_op("leaky_relu", UnaryOp::leaky_relu, x, params);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  LIFTOFF_CHECK(approximate == "none" || approximate == "tanh", ValueError, "gelu: approximate is '",
                approximate, "'; use \"none\" (exact) or \"tanh\"");
  return approximate == "none" ? unary_op("gelu", UnaryOp::gelu, x) : unary_op("gelu", UnaryOp::gelu_tanh, x);
}

Tensor silu(const Tensor& x) {
  return unary_op("silu", UnaryOp::silu, x);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  LIFTOFF_CHECK(beta != 0.0, ValueError, "softplus: beta is 0; it must be nonzero (PyTorch's default is 1)");
  UnaryParams params;
  params.beta = beta;
  params.threshold = threshold;
  return unary_op("softplus", UnaryOp::softplus, x, params, Autocast::f32);
}

Tensor hardsigmoid(const Tensor& x) {
  return unary_op("hardsigmoid", UnaryOp::hardsigmoid, x);
}
Tensor hardswish(const Tensor& x) {
  return unary_op("hardswish", UnaryOp::hardswish, x);
}

Tensor elu(const Tensor& x, double alpha) {
  UnaryParams params;
  params.alpha = alpha;
  return unary_op("elu", UnaryOp::elu, x, params);
}

Tensor square(const Tensor& x) {
  return unary_op("square", UnaryOp::square, x);
}
Tensor sin(const Tensor& x) {
  return unary_op("sin", UnaryOp::sin, x);
}
Tensor cos(const Tensor& x) {
  return unary_op("cos", UnaryOp::cos, x);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  LIFTOFF_CHECK(min.has_value() || max.has_value(), ValueError,
                "clamp: at least one of min and max must be given (both are std::nullopt)");
  UnaryParams params;
  if (min) params.min = *min;
  if (max) params.max = *max;
  return unary_op("clamp", UnaryOp::clamp, x, params);
}

}  // namespace liftoff
