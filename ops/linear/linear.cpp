#include "ops/linear/linear.h"

#include "ops/linear/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

// op(a) @ op(b) into a fresh [rows, cols] tensor.
Tensor gemm(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const int64_t rows = ta ? a.size(1) : a.size(0);
  const int64_t cols = tb ? b.size(0) : b.size(1);
  Tensor c = Tensor::empty({rows, cols}, a.dtype(), a.device());
  LIFTOFF_DISPATCH(a.device(), gemm, a, ta, b, tb, c);
  return c;
}

void check_same_kind(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                     const Tensor& b) {
  LIFTOFF_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": ", name_a, " ", describe(a), " and ", name_b, " ",
                describe(b), " have different dtypes");
  LIFTOFF_CHECK(a.device() == b.device(), DeviceError, op, ": ", name_a, " ", describe(a), " and ", name_b,
                " ", describe(b), " are on different devices");
}
}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  LIFTOFF_CHECK(a_in.defined() && b_in.defined(), ValueError,
                "matmul: both operands must be defined tensors");
  LIFTOFF_CHECK(a_in.dim() == 2 && b_in.dim() == 2, ShapeError, "matmul: expected 2-D operands, got ",
                shape_str(a_in.shape()), " and ", shape_str(b_in.shape()));
  LIFTOFF_CHECK(a_in.size(1) == b_in.size(0), ShapeError, "matmul: ", shape_str(a_in.shape()), " @ ",
                shape_str(b_in.shape()), ": inner dimensions ", a_in.size(1), " and ", b_in.size(0),
                " differ");
  check_same_kind("matmul", "a", a_in, "b", b_in);
  LIFTOFF_CHECK(is_floating(a_in.dtype()), DTypeError, "matmul: dtype ", dtype_name(a_in.dtype()),
                " is not a floating type (operands ", shape_str(a_in.shape()), ", ", shape_str(b_in.shape()),
                ")");
  const Tensor a = a_in.contiguous();
  const Tensor b = b_in.contiguous();
  Tensor y = gemm(a, false, b, false);
  if (should_record({a, b})) {
    record(y, "matmul", {a, b},
           [a_saved = a.detach(), b_saved = b.detach()](const Tensor& gy, const NeedsGrad& needs) {
             const Tensor g = gy.to(a_saved.dtype()).contiguous();
             Tensor ga, gb;
             if (needs[0]) ga = gemm(g, false, b_saved, true);  // [M, N] @ [K, N]^T
             if (needs[1]) gb = gemm(a_saved, true, g, false);  // [M, K]^T @ [M, N]
             return std::vector<Tensor>{ga, gb};
           });
  }
  return y;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  LIFTOFF_CHECK(x_in.defined() && w_in.defined(), ValueError,
                "linear: input and weight must be defined tensors");
  LIFTOFF_CHECK(x_in.dim() == 2, ShapeError, "linear: expected input [N, in_features], got ",
                shape_str(x_in.shape()), " (weight ", shape_str(w_in.shape()), ")");
  LIFTOFF_CHECK(w_in.dim() == 2, ShapeError, "linear: expected weight [out_features, in_features], got ",
                shape_str(w_in.shape()), " (input ", shape_str(x_in.shape()), ")");
  LIFTOFF_CHECK(x_in.size(1) == w_in.size(1), ShapeError, "linear: input ", shape_str(x_in.shape()),
                " does not match weight ", shape_str(w_in.shape()), " (in_features ", w_in.size(1), ")");
  check_same_kind("linear", "input", x_in, "weight", w_in);
  LIFTOFF_CHECK(is_floating(x_in.dtype()), DTypeError, "linear: dtype ", dtype_name(x_in.dtype()),
                " is not a floating type (input ", shape_str(x_in.shape()), ")");
  const bool has_bias = bias_in.defined();
  if (has_bias) {
    LIFTOFF_CHECK(bias_in.dim() == 1 && bias_in.size(0) == w_in.size(0), ShapeError, "linear: bias ",
                  shape_str(bias_in.shape()), " does not match weight ", shape_str(w_in.shape()),
                  " (out_features ", w_in.size(0), ")");
    check_same_kind("linear", "weight", w_in, "bias", bias_in);
  }
  const Tensor x = x_in.contiguous();
  const Tensor w = w_in.contiguous();
  const Tensor bias = has_bias ? bias_in.contiguous() : Tensor();
  Tensor y = gemm(x, false, w, true);
  if (has_bias) LIFTOFF_DISPATCH(y.device(), bias_add, y, bias);
  if (should_record({x, w, bias})) {
    record(y, "linear", {x, w, bias},
           [x_saved = x.detach(), w_saved = w.detach()](const Tensor& gy, const NeedsGrad& needs) {
             const Tensor g = gy.to(x_saved.dtype()).contiguous();
             Tensor gx, gw, gb;
             if (needs[0]) gx = gemm(g, false, w_saved, false);  // [N, out] @ [out, in]
             if (needs[1]) gw = gemm(g, true, x_saved, false);   // [N, out]^T @ [N, in]
             if (needs[2]) {
               gb = Tensor::empty({g.size(1)}, g.dtype(), g.device());
               LIFTOFF_DISPATCH(g.device(), bias_grad, g, gb);
             }
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace liftoff
