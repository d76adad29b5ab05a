#include "ops/matmul/matmul.h"

#include "ops/common/broadcast.h"
#include "ops/matmul/batched.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace md = matmul_detail;

namespace {
// All dims but the last: [..., M, K] -> [..., M] (their product is the row count of the folded product).
Shape batch_rows(const Shape& shape) {
  return Shape(shape.begin(), shape.end() - 1);
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  LIFTOFF_CHECK(a.defined() && b.defined(), ValueError, op, ": both operands must be defined tensors");
  md::check_same_kind(op, "a", a, "b", b);
  LIFTOFF_CHECK(is_floating(a.dtype()), DTypeError, op, ": dtype ", dtype_name(a.dtype()),
                " is not a floating type (operands ", shape_str(a.shape()), ", ", shape_str(b.shape()), ")");
}

// a [..., M, K] @ b [..., K, N] (both at least 2-D, shapes checked) with autograd.
Tensor batched_product(const char* op, const Tensor& a, const Tensor& b) {
  Tensor y = md::batched_matmul(a, b);
  if (should_record({a, b})) {
    record(
        y, op, {a, b},
        [a_saved = a.detach(), b_saved = b.detach()](const Tensor& gy, const NeedsGrad& needs) {
          const Tensor g = gy.to(a_saved.dtype());
          const Shape batch = md::batch_shape(g.shape());
          Tensor ga, gb;
          if (needs[0])
            ga = sum_to_shape(md::batched_matmul(g, md::transpose_last2(b_saved), 1.0, batch), a_saved.shape());
          if (needs[1])
            gb = sum_to_shape(md::batched_matmul(md::transpose_last2(a_saved), g, 1.0, batch), b_saved.shape());
          return std::vector<Tensor>{ga, gb};
        });
  }
  return y;
}
}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  LIFTOFF_CHECK(a_in.defined() && b_in.defined(), ValueError,
                "matmul: both operands must be defined tensors");
  const Tensor a = md::autocast_input(a_in);
  const Tensor b = md::autocast_input(b_in);
  check_operands("matmul", a, b);
  LIFTOFF_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError,
                "matmul: both operands need at least one dimension, got ", shape_str(a.shape()), " and ",
                shape_str(b.shape()));
  const int64_t k_b = b.dim() == 1 ? b.size(0) : b.size(-2);
  LIFTOFF_CHECK(a.size(-1) == k_b, ShapeError, "matmul: ", shape_str(a.shape()), " @ ", shape_str(b.shape()),
                ": inner dimensions ", a.size(-1), " and ", k_b,
                " differ (a's last dim must equal b's second-to-last, or its only dim for a 1-D b)");
  Shape batch;
  LIFTOFF_CHECK(md::broadcast_shapes(md::batch_shape(a.shape()), md::batch_shape(b.shape()), &batch),
                ShapeError, "matmul: ", shape_str(a.shape()), " @ ", shape_str(b.shape()), ": batch dims ",
                shape_str(md::batch_shape(a.shape())), " and ", shape_str(md::batch_shape(b.shape())),
                " do not broadcast (each pair of sizes must be equal or 1)");
  // Result shape: the broadcast batch, then M unless a is 1-D, then N unless b is 1-D.
  Shape out = batch;
  if (a.dim() >= 2) out.push_back(a.size(-2));
  if (b.dim() >= 2) out.push_back(b.size(-1));

  const Tensor b2 = b.dim() == 1 ? reshape(b, {b.size(0), 1}) : b;
  if (b2.dim() == 2 && a.dim() >= 2) {
    // [..., M, K] @ [K, N]: one GEMM over all rows of a (a view when a is contiguous), as PyTorch folds it;
    // then b's gradient is a single [K, rows] @ [rows, N] product instead of a sum over the batch.
    const Tensor a2 = a.dim() == 2 ? a : reshape(a, {shape_numel(batch_rows(a.shape())), a.size(-1)});
    return reshape(batched_product("matmul", a2, b2), out);
  }
  const Tensor a2 = a.dim() == 1 ? reshape(a, {1, a.size(0)}) : a;
  return reshape(batched_product("matmul", a2, b2), out);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  LIFTOFF_CHECK(a_in.defined() && b_in.defined(), ValueError, "bmm: both operands must be defined tensors");
  const Tensor a = md::autocast_input(a_in);
  const Tensor b = md::autocast_input(b_in);
  check_operands("bmm", a, b);
  LIFTOFF_CHECK(a.dim() == 3 && b.dim() == 3, ShapeError,
                "bmm: expected 3-D operands [B, M, K] and [B, K, N], got ", shape_str(a.shape()), " and ",
                shape_str(b.shape()), " (matmul broadcasts other ranks)");
  LIFTOFF_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), ShapeError, "bmm: ", shape_str(a.shape()),
                " @ ", shape_str(b.shape()), ": expected equal batch sizes and a's K (", a.size(2),
                ") equal to b's (", b.size(1), ")");
  return batched_product("bmm", a, b);
}

}  // namespace liftoff
