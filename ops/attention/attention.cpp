#include "ops/attention/attention.h"

#include <cmath>

#include "ops/attention/cudnn_sdpa.h"
#include "ops/attention/flash.h"
#include "ops/attention/kernels.h"
#include "ops/attention/path.h"
#include "ops/cast/cast.h"
#include "ops/common/broadcast.h"
#include "ops/matmul/batched.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace md = matmul_detail;

namespace {
constexpr const char* kOp = "scaled_dot_product_attention";

std::string shapes_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  return str_cat("query ", shape_str(q.shape()), ", key ", shape_str(k.shape()), ", value ",
                 shape_str(v.shape()));
}

// Shapes, dtypes and devices of q, k, v; returns their broadcast batch dims.
Shape check_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  LIFTOFF_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ShapeError, kOp,
                ": expected query [..., L, E], key [..., S, E], value [..., S, Ev], got ",
                shapes_of(q, k, v));
  LIFTOFF_CHECK(k.size(-1) == q.size(-1), ShapeError, kOp, ": key's last dim ", k.size(-1),
                " differs from query's embedding size ", q.size(-1), " (", shapes_of(q, k, v), ")");
  LIFTOFF_CHECK(v.size(-2) == k.size(-2), ShapeError, kOp, ": value's length ", v.size(-2),
                " differs from key's length ", k.size(-2), " (", shapes_of(q, k, v), ")");
  md::check_same_kind(kOp, "query", q, "key", k);
  md::check_same_kind(kOp, "query", q, "value", v);
  LIFTOFF_CHECK(is_floating(q.dtype()), DTypeError, kOp, ": dtype ", dtype_name(q.dtype()),
                " is not a floating type (", shapes_of(q, k, v), ")");
  Shape batch;
  const bool ok = md::broadcast_shapes(md::batch_shape(q.shape()), md::batch_shape(k.shape()), &batch) &&
                  md::broadcast_shapes(batch, md::batch_shape(v.shape()), &batch);
  LIFTOFF_CHECK(ok, ShapeError, kOp, ": batch dims do not broadcast (", shapes_of(q, k, v),
                "; each pair of sizes must be equal or 1)");
  LIFTOFF_CHECK(batch.size() <= static_cast<size_t>(kMaxAttentionBatchDims), ShapeError, kOp, ": ",
                batch.size(), " batch dims (", shapes_of(q, k, v), "); at most ", kMaxAttentionBatchDims);
  return batch;
}

// The mask as the softmax kernel reads it (strides into [batch..., L, S], 0 where broadcast).
AttentionMask mask_view(const Tensor& mask, const Shape& batch) {
  AttentionMask view;
  if (!mask.defined()) return view;
  view.kind = mask.dtype() == DType::u8 ? AttentionMask::kBool : AttentionMask::kAdditive;
  view.data = mask.raw_data();
  const int64_t full = static_cast<int64_t>(batch.size()) + 2;
  const auto stride = [&](int64_t d) {  // d indexes the full [batch..., L, S]
    const int64_t mask_dim = d - (full - mask.dim());
    return mask_dim < 0 || mask.shape()[static_cast<size_t>(mask_dim)] == 1
               ? 0
               : mask.strides()[static_cast<size_t>(mask_dim)];
  };
  view.batch_ndim = static_cast<int>(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) {
    view.batch_sizes[d] = batch[d];
    view.batch_strides[d] = stride(static_cast<int64_t>(d));
  }
  view.stride_l = stride(full - 2);
  view.stride_s = stride(full - 1);
  return view;
}

// attn_mask checked against the scores' shape; a floating mask comes back in the query's dtype.
Tensor check_mask(const Tensor& mask_in, const Tensor& q, const Shape& scores_shape, bool is_causal) {
  if (!mask_in.defined()) return mask_in;
  LIFTOFF_CHECK(!is_causal, ValueError, kOp, ": pass either attn_mask ", shape_str(mask_in.shape()),
                " or is_causal = true, not both (fold the causal rule into the mask)");
  LIFTOFF_CHECK(mask_in.dtype() == DType::u8 || is_floating(mask_in.dtype()), DTypeError, kOp, ": attn_mask ",
                md::describe(mask_in),
                " must be u8 (boolean, nonzero = attend) or floating (added to the scores)");
  LIFTOFF_CHECK(mask_in.device() == q.device(), DeviceError, kOp, ": attn_mask ", md::describe(mask_in),
                " and query ", md::describe(q), " are on different devices");
  Shape b;
  LIFTOFF_CHECK(md::broadcast_shapes(mask_in.shape(), scores_shape, &b) && b == scores_shape, ShapeError, kOp,
                ": attn_mask ", shape_str(mask_in.shape()), " does not broadcast to the attention weights ",
                shape_str(scores_shape), " [batch..., L, S]");
  return mask_in.dtype() == DType::u8 ? mask_in : cast(mask_in, q.dtype());
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  LIFTOFF_CHECK(query.defined() && key.defined() && value.defined(), ValueError, kOp,
                ": query, key and value must be defined tensors");
  const Tensor q = md::autocast_input(query), k = md::autocast_input(key), v = md::autocast_input(value);
  const Shape batch = check_qkv(q, k, v);
  const int64_t l = q.size(-2), s = k.size(-2);
  Shape scores_shape = batch;
  scores_shape.push_back(l);
  scores_shape.push_back(s);
  const Tensor mask = check_mask(md::autocast_input(attn_mask), q, scores_shape, is_causal);
  LIFTOFF_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError, kOp, ": dropout_p = ", dropout_p,
                " is outside [0, 1]");
  LIFTOFF_CHECK(dropout_p == 0.0 || gen != nullptr, ValueError, kOp, ": dropout_p = ", dropout_p,
                " needs a Generator (pass gen, or dropout_p = 0 in eval)");
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // The fused paths (f16/bf16 CUDA, no mask, no dropout) never materialise the weights (path.h says which
  // runs); the plain path below takes the rest.
  AttentionPath path = attention_path(q, k, v, mask, dropout_p);
  if (path == AttentionPath::cudnn) {
    const Tensor out = cudnn_attention(q, k, v, batch, sc, is_causal);
    if (out.defined()) return out;
    path = cudnn_fallback_path(attention_call_facts(q, k, v, mask, dropout_p));
  }
  if (path == AttentionPath::flash) return flash_attention(q, k, v, batch, sc, is_causal);

  AttentionRows rows;
  rows.rows = shape_numel(batch) * l;
  rows.l = l;
  rows.s = s;
  rows.causal = is_causal;
  rows.dropout_p = dropout_p;
  // probs: the scaled scores, then (in place) the softmax probabilities.
  Tensor probs = md::batched_matmul(q, md::transpose_last2(k), sc, batch);
  Tensor dropped;
  if (dropout_p > 0.0) {
    rows.draw = gen->next_draw(q.device());  // graph-safe on CUDA
    dropped = Tensor::empty(scores_shape, q.dtype(), q.device());
  }
  LIFTOFF_DISPATCH(q.device(), attention_softmax_forward, probs, dropped, mask_view(mask, batch), rows);
  const Tensor attn = dropped.defined() ? dropped : probs;
  Shape out_shape = batch;
  out_shape.push_back(l);
  out_shape.push_back(v.size(-1));
  const Tensor out = md::empty_in_order_of(out_shape, q, q.dtype(), q.device());
  md::batched_matmul_into(attn, v, out);

  const Tensor mask_input = mask.defined() && mask.dtype() != DType::u8 ? mask : Tensor();
  if (should_record({q, k, v, mask_input})) {
    record(out, kOp, {q, k, v, mask_input},
           [q_saved = q.detach(), k_saved = k.detach(), v_saved = v.detach(), probs, attn, rows, sc, batch,
            mask_shape = mask.defined() ? mask.shape() : Shape{}](const Tensor& gy, const NeedsGrad& needs) {
             const Tensor g = gy.to(q_saved.dtype());
             // The gradient of an input, in that input's memory order where it was not broadcast.
             const auto product_for = [&](const Tensor& a, const Tensor& b, double alpha,
                                          const Tensor& input) {
               Shape shape = batch;
               shape.push_back(a.size(-2));
               shape.push_back(b.size(-1));
               if (shape != input.shape())
                 return sum_to_shape(md::batched_matmul(a, b, alpha, batch), input.shape());
               const Tensor grad = md::empty_in_order_of(shape, input, input.dtype(), input.device());
               md::batched_matmul_into(a, b, grad, alpha);
               return grad;
             };
             Tensor gq, gk, gv, gmask;
             if (needs[2]) gv = product_for(md::transpose_last2(attn), g, 1.0, v_saved);
             if (!needs[0] && !needs[1] && !needs[3]) return std::vector<Tensor>{gq, gk, gv, gmask};
             // d(attn), then in place the gradient of the scaled, masked scores.
             const Tensor ds = md::batched_matmul(g, md::transpose_last2(v_saved), 1.0, batch);
             LIFTOFF_DISPATCH(ds.device(), attention_softmax_backward, probs, ds, rows);
             if (needs[0]) gq = product_for(ds, k_saved, sc, q_saved);
             if (needs[1]) gk = product_for(md::transpose_last2(ds), q_saved, sc, k_saved);
             if (needs[3]) gmask = sum_to_shape(ds, mask_shape);
             return std::vector<Tensor>{gq, gk, gv, gmask};
           });
  }
  return out;
}

}  // namespace liftoff
