#include "ops/linear/linear.h"

#include "ops/linear/kernels.h"
#include "ops/matmul/batched.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace md = matmul_detail;

namespace {
// x [rows, in] (any strides) @ w^T + bias, with autograd.
Tensor linear_rows(const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor y = md::batched_matmul(x, md::transpose_last2(w));
  if (bias.defined()) LIFTOFF_DISPATCH(y.device(), bias_add, y, bias);
  if (should_record({x, w, bias})) {
    record(y, "linear", {x, w, bias},
           [x_saved = x.detach(), w_saved = w.detach()](const Tensor& gy, const NeedsGrad& needs) {
             const Tensor g = gy.to(x_saved.dtype()).contiguous();
             Tensor gx, gw, gb;
             if (needs[0]) gx = md::batched_matmul(g, w_saved);                       // [N, out] @ [out, in]
             if (needs[1]) gw = md::batched_matmul(md::transpose_last2(g), x_saved);  // [N, out]^T @ [N, in]
             if (needs[2]) {
               gb = Tensor::empty({g.size(1)}, g.dtype(), g.device());
               LIFTOFF_DISPATCH(g.device(), bias_grad, g, gb);
             }
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}
}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  LIFTOFF_CHECK(x_in.defined() && w_in.defined(), ValueError,
                "linear: input and weight must be defined tensors");
  const Tensor x = md::autocast_input(x_in);
  const Tensor w = md::autocast_input(w_in);
  const Tensor bias = md::autocast_input(bias_in);
  LIFTOFF_CHECK(x.dim() >= 1, ShapeError, "linear: expected input [..., in_features], got ",
                shape_str(x.shape()), " (weight ", shape_str(w.shape()), ")");
  LIFTOFF_CHECK(w.dim() == 2, ShapeError, "linear: expected weight [out_features, in_features], got ",
                shape_str(w.shape()), " (input ", shape_str(x.shape()), ")");
  LIFTOFF_CHECK(x.size(-1) == w.size(1), ShapeError, "linear: input ", shape_str(x.shape()),
                " does not match weight ", shape_str(w.shape()), " (in_features ", w.size(1), ")");
  md::check_same_kind("linear", "input", x, "weight", w);
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, "linear: dtype ", dtype_name(x.dtype()),
                " is not a floating type (input ", shape_str(x.shape()), ")");
  if (bias.defined()) {
    LIFTOFF_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), ShapeError, "linear: bias ",
                  shape_str(bias.shape()), " does not match weight ", shape_str(w.shape()), " (out_features ",
                  w.size(0), ")");
    md::check_same_kind("linear", "weight", w, "bias", bias);
  }
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  if (x.dim() == 2) return linear_rows(x, w, b);
  // Leading dims flattened into rows (a view when x is contiguous), the result viewed back.
  Shape out = x.shape();
  out.back() = w.size(0);
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  return reshape(linear_rows(reshape(x, {rows, x.size(-1)}), w, b), out);
}

}  // namespace liftoff
