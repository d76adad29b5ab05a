// MultiheadAttention and TransformerEncoderLayer (declared in models/nn/layers.h).
#include <cmath>
#include <utility>

#include "models/nn/layers.h"
#include "ops/cast/cast.h"
#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

// [N, T, E] -> [N, heads, T, E/heads] (a view: the heads become a batch dim of the attention).
Tensor split_heads(const Tensor& x, int64_t heads) {
  return transpose(unflatten(x, 2, {heads, -1}), 1, 2);
}

void check_attention_input(const Tensor& t, const char* what, int64_t embed_dim, const Tensor& query) {
  LIFTOFF_CHECK(t.dim() == 3 && t.size(2) == embed_dim && t.size(0) == query.size(0), ShapeError,
                "MultiheadAttention: ", what, " must be [N, T, embed_dim = ", embed_dim,
                "] with the query's N (batch_first=True), got ", what, " ", shape_str(t.shape()),
                " and query ", shape_str(query.shape()));
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, Generator& gen, double dropout,
                                       bool bias)
    : embed_dim_(embed_dim), num_heads_(num_heads), dropout_p_(dropout) {
  LIFTOFF_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, ValueError,
                "MultiheadAttention: embed_dim (", embed_dim, ") must be a positive multiple of num_heads (",
                num_heads, ")");
  LIFTOFF_CHECK(dropout >= 0 && dropout < 1, ValueError,
                "MultiheadAttention: dropout must be in [0, 1), got ", dropout);
  // PyTorch's _reset_parameters: xavier_uniform over fan_in + fan_out = E + 3E, zero biases.
  const double bound = std::sqrt(6.0 / static_cast<double>(4 * embed_dim));
  in_proj_weight_ =
      register_parameter("in_proj_weight", rand_uniform({3 * embed_dim, embed_dim}, gen, -bound, bound));
  if (bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, gen));
  if (bias) out_proj_->bias().zero_();
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, draw_seed(gen)));
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  return forward(x, x, x);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, bool is_causal) {
  LIFTOFF_CHECK(query.defined() && key.defined() && value.defined(), ValueError,
                "MultiheadAttention: query, key and value must be defined");
  LIFTOFF_CHECK(query.dim() == 3, ShapeError,
                "MultiheadAttention: query must be [N, L, embed_dim = ", embed_dim_,
                "] (batch_first=True), got ", shape_str(query.shape()));
  check_attention_input(query, "query", embed_dim_, query);
  check_attention_input(key, "key", embed_dim_, query);
  check_attention_input(value, "value", embed_dim_, query);
  LIFTOFF_CHECK(key.size(1) == value.size(1), ShapeError,
                "MultiheadAttention: key and value must have one sequence length, got key ",
                shape_str(key.shape()), " and value ", shape_str(value.shape()));
  const int64_t n = query.size(0), l = query.size(1), s = key.size(1);
  Tensor mask = attn_mask;
  if (mask.defined()) {
    LIFTOFF_CHECK(
        is_floating(mask.dtype()), DTypeError,
        "MultiheadAttention: attn_mask must be a floating "
        "(additive) mask, got ",
        dtype_name(mask.dtype()),
        "; for a boolean mask (PyTorch: True = masked) pass 0 where attending and -inf where masked");
    const bool per_head = mask.dim() == 3 && mask.size(0) == n * num_heads_;
    LIFTOFF_CHECK((mask.dim() == 2 || per_head) && mask.size(-2) == l && mask.size(-1) == s, ShapeError,
                  "MultiheadAttention: attn_mask must be [L, S] = [", l, ", ", s,
                  "] or [N*num_heads, L, S] = [", n * num_heads_, ", ", l, ", ", s, "], got ",
                  shape_str(mask.shape()));
    if (per_head) mask = reshape(mask, {n, num_heads_, l, s});
  }

  // The packed in-projection: one GEMM for self-attention, three row blocks of the weight otherwise.
  Tensor weight = in_proj_weight_, bias = in_proj_bias_;
  DType half = DType::f32;
  const bool autocast = autocast_enabled(&half);
  if (autocast) {
    weight = in_weight_half_.get(in_proj_weight_, half);
    bias = in_bias_half_.get(in_proj_bias_, half);
  }
  auto input = [&](const Tensor& t) { return autocast ? cast(t, half) : t; };
  Tensor q, k, v;
  if (query.same(key) && key.same(value)) {
    const std::vector<Tensor> qkv = chunk(linear(input(query), weight, bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const std::vector<Tensor> w = chunk(weight, 3, 0);
    const std::vector<Tensor> b = bias.defined() ? chunk(bias, 3, 0) : std::vector<Tensor>(3);
    q = linear(input(query), w[0], b[0]);
    k = linear(input(key), w[1], b[1]);
    v = linear(input(value), w[2], b[2]);
  }
  const double p = is_training() ? dropout_p_ : 0.0;
  Tensor out = scaled_dot_product_attention(split_heads(q, num_heads_), split_heads(k, num_heads_),
                                            split_heads(v, num_heads_), mask, p, is_causal, std::nullopt,
                                            p > 0 ? &dropout_->generator() : nullptr);
  out = reshape(transpose(out, 1, 2), {n, l, embed_dim_});  // heads joined: [N, L, H, E/H] -> [N, L, E]
  return out_proj_->forward(out);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, Generator& gen,
                                                 int64_t dim_feedforward, double dropout,
                                                 std::string activation, double layer_norm_eps,
                                                 bool norm_first)
    : norm_first_(norm_first), activation_(std::move(activation)) {
  LIFTOFF_CHECK(activation_ == "relu" || activation_ == "gelu", ValueError,
                "TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"", activation_,
                "\"");
  LIFTOFF_CHECK(dim_feedforward > 0, ValueError,
                "TransformerEncoderLayer: dim_feedforward must be positive, got ", dim_feedforward);
  // PyTorch's registration order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
  self_attn_ =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, gen, dropout));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, true, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, draw_seed(gen)));
  linear2_ = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, true, gen));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(dropout, draw_seed(gen)));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(dropout, draw_seed(gen)));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x) {
  return dropout1_->forward(self_attn_->forward(x));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  const Tensor h = linear1_->forward(x);
  const Tensor a = activation_ == "gelu" ? gelu(h) : relu(h);
  return dropout2_->forward(linear2_->forward(dropout_->forward(a)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x) {
  LIFTOFF_CHECK(x.dim() == 3, ShapeError,
                "TransformerEncoderLayer: x must be [N, L, d_model] (batch_first), got ",
                shape_str(x.shape()));
  if (norm_first_) {
    const Tensor y = x + self_attention_block(norm1_->forward(x));
    return y + feed_forward_block(norm2_->forward(y));
  }
  const Tensor y = norm1_->forward(x + self_attention_block(x));
  return norm2_->forward(y + feed_forward_block(y));
}

}  // namespace liftoff
