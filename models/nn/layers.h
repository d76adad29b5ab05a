// Layers: modules around the ops of ops/, with PyTorch's parameter names, shapes and default initialisation.
// Layers with random initial weights take a Generator and draw from it in construction order (weight, then
// bias), so one seed determines a whole model. Conv2d and Linear use PyTorch's default
// kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias alike.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "runtime/autocast.h"
#include "runtime/random.h"

namespace liftoff {

// weight [out, in/groups, k, k], bias [out] (when bias); square kernel, stride, zero padding and dilation.
// forward: x [N, in, H, W] -> [N, out, (H + 2p - d(k-1) - 1)/stride + 1, (same for W)]
// (ops/conv2d/conv2d.h); under autocast in the half dtype, and on CUDA channels-last (the runtime's layout
// choice, conv2d_memory_format). groups divides in and out (groups == in == out: a depthwise convolution);
// the init bound uses fan_in = in/groups * k * k, as PyTorch.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
         bool bias, Generator& gen, int64_t dilation = 1, int64_t groups = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  int64_t stride_, padding_, dilation_, groups_;
  Tensor weight_, bias_;
  HalfWeightCache weight_half_, bias_half_;  // --amp copies, refreshed once per optimizer step
};

// Parameters weight (ones) and bias (zeros) [C]; buffers running_mean (zeros), running_var (ones) [C] in f32
// and num_batches_tracked (i64 scalar), incremented by each training-mode forward.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x) + residual) as one op (ops/batch_norm2d: batch_norm2d_relu); residual may be undefined.
  Tensor forward_relu(const Tensor& x, const Tensor& residual = Tensor());
  std::string type_name() const override { return "BatchNorm2d"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

 private:
  double eps_, momentum_;
  // num_batches_tracked: incremented by the op in training mode (on the device, inside its statistics
  // kernel).
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

// weight [out, in], bias [out] (when bias): [N, in] -> [N, out]; under autocast in the half dtype.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
  HalfWeightCache weight_half_, bias_half_;
};

// max(x, 0), elementwise; no parameters.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

// stride < 1 means stride = kernel (PyTorch's default).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }

 private:
  int64_t kernel_, stride_, padding_;
};

// stride < 1 means stride = kernel; padded zeros count in the divisor (count_include_pad=True).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  int64_t kernel_, stride_, padding_;
};

// Mean over H and W: [N, C, H, W] -> [N, C] (PyTorch: AdaptiveAvgPool2d(1) followed by flatten(1)).
class GlobalAvgPool : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GlobalAvgPool"; }
};

// Collapses dimensions start_dim.. into one.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1) : start_dim_(start_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  int64_t start_dim_;
};

// Inverted dropout with probability p, active in training mode only. The module owns its Generator, seeded at
// construction; generator() exposes it so checkpoints can save and restore the stream position.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  Generator& generator() { return gen_; }

 private:
  double p_;
  Generator gen_;
};

// Applies its children in order; they are named "0", "1", ... as in PyTorch's nn.Sequential.
// An empty Sequential is the identity.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  Sequential& push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;
};

// ---- Layers around the newer ops (PyTorch's nn names; parameters as PyTorch names and initialises them)
// ----

// Transposed convolution (ops/conv_transpose2d): weight [in, out/groups, k, k], bias [out] (when bias), both
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = out/groups * k * k (PyTorch computes fan_in from
// weight.size(1)). x [N, in, H, W] -> [N, out, (H-1)*stride - 2p + d(k-1) + output_padding + 1, ...]; under
// autocast in the half dtype. Difference from PyTorch: gen comes before the rarely used groups and dilation.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
                  int64_t output_padding, bool bias, Generator& gen, int64_t groups = 1,
                  int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ConvTranspose2d"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t stride_, padding_, output_padding_, groups_, dilation_;
  Tensor weight_, bias_;
  HalfWeightCache weight_half_, bias_half_;
};

// nn.LayerNorm(normalized_shape, eps, elementwise_affine, bias): normalises over the last
// normalized_shape.size() dims of x (ops/layer_norm). weight (ones) and bias (zeros) have normalized_shape
// when elementwise_affine (bias only when bias too). Under autocast a half CUDA input is normalised in f32
// and the output is f32, as PyTorch.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(const Shape& normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true)
      : LayerNorm(Shape{normalized_shape}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_, bias_;
};

// nn.GroupNorm(num_groups, num_channels, eps, affine): x [N, C, *] with C == num_channels, divisible by
// num_groups (ops/group_norm). weight (ones) and bias (zeros) [C] when affine. Autocast as LayerNorm.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupNorm"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t num_groups_;
  double eps_;
  Tensor weight_, bias_;
};

// nn.Embedding(num_embeddings, embedding_dim, padding_idx): weight [num_embeddings, dim] ~ N(0, 1) with the
// padding_idx row zeroed (it gets no gradient either; negative counts from the end). forward: integer indices
// of any shape -> [*indices.shape, dim] (ops/embedding).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  const Tensor& weight() const { return weight_; }

 private:
  std::optional<int64_t> padding_idx_;
  Tensor weight_;
};

// Parameter-free activations (ops/unary), any shape, as nn.GELU / SiLU / ReLU6 / Hardswish / Sigmoid / Tanh.
// GELU's approximate is "none" (erf) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }

 private:
  std::string approximate_;
};

#define LIFTOFF_ACTIVATION_MODULE(Name)                      \
  class Name : public Module {                               \
   public:                                                   \
    Tensor forward(const Tensor& x) override;                \
    std::string type_name() const override { return #Name; } \
  };
LIFTOFF_ACTIVATION_MODULE(SiLU)
LIFTOFF_ACTIVATION_MODULE(ReLU6)
LIFTOFF_ACTIVATION_MODULE(Hardswish)
LIFTOFF_ACTIVATION_MODULE(Sigmoid)
LIFTOFF_ACTIVATION_MODULE(Tanh)
// nn.Identity: returns x itself (no copy).
LIFTOFF_ACTIVATION_MODULE(Identity)
#undef LIFTOFF_ACTIVATION_MODULE

// nn.AdaptiveAvgPool2d(output_size): {s} or {oh, ow}, -1 keeps the input's size (ops/adaptive_avg_pool2d).
// Keeps the dims: AdaptiveAvgPool2d({1}) gives [N, C, 1, 1] (GlobalAvgPool gives [N, C]).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }

 private:
  std::vector<int64_t> output_size_;
};

// nn.Upsample(size, scale_factor, mode, align_corners) over [N, C, H, W] (ops/upsample: interpolate). Give
// exactly one of size and scale_factor (checked at construction); mode "nearest" or "bilinear".
class Upsample : public Module {
 public:
  explicit Upsample(std::vector<int64_t> size = {}, std::vector<double> scale_factor = {},
                    std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Upsample"; }

 private:
  std::vector<int64_t> size_;
  std::vector<double> scale_factor_;
  std::string mode_;
  std::optional<bool> align_corners_;
};

// nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=True) with kdim = vdim = embed_dim
// (PyTorch's packed in-projection). Parameters, PyTorch's names and init: in_proj_weight [3E, E]
// (xavier_uniform), in_proj_bias [3E] (zeros), out_proj.weight [E, E] (Linear's default), out_proj.bias [E]
// (zeros). forward(query [N, L, E], key [N, S, E], value [N, S, E]) -> [N, L, E]: q, k, v = the three row
// blocks of the in-projection, split into num_heads heads of E/num_heads, attended with
// scaled_dot_product_attention (dropout on the attention weights in training mode), heads joined, out_proj.
// forward(x) is self-attention. attn_mask: a floating mask added to the scores, [L, S] or [N*num_heads, L,
// S]; is_causal masks future keys. Under autocast the projections and the attention run in the half dtype.
// The attention-weight dropout draws from the child "dropout" (a Dropout module, so checkpoints save its
// stream). Differences from PyTorch: batch_first only, no need_weights (only the output is returned), no
// key_padding_mask, no boolean masks (PyTorch's True = "masked" is the inverse of
// scaled_dot_product_attention's; pass an additive float mask with -inf instead), no
// add_bias_kv/add_zero_attn.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, Generator& gen, double dropout = 0.0,
                     bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = Tensor(), bool is_causal = false);
  std::string type_name() const override { return "MultiheadAttention"; }
  const Tensor& in_proj_weight() const { return in_proj_weight_; }
  const Tensor& in_proj_bias() const { return in_proj_bias_; }
  Linear& out_proj() const { return *out_proj_; }

 private:
  int64_t embed_dim_, num_heads_;
  double dropout_p_;
  Tensor in_proj_weight_, in_proj_bias_;
  HalfWeightCache in_weight_half_, in_bias_half_;
  std::shared_ptr<Linear> out_proj_;
  std::shared_ptr<Dropout> dropout_;
};

// nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
// batch_first=True, norm_first): self_attn (MultiheadAttention), linear1 [d_model -> dim_feedforward],
// linear2 back, norm1, norm2 (LayerNorm), dropout / dropout1 / dropout2 (Dropout; their seeds drawn from
// gen). x [N, L, d_model] -> same. norm_first: x + sa(norm1(x)), then + ff(norm2(.)); otherwise norm1(x +
// sa(x)), then norm2(. + ff(.)). activation "relu" (PyTorch's default) or "gelu".
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, Generator& gen, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, std::string activation = "relu", double layer_norm_eps = 1e-5,
                          bool norm_first = false);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  MultiheadAttention& self_attn() const { return *self_attn_; }

 private:
  Tensor self_attention_block(const Tensor& x);
  Tensor feed_forward_block(const Tensor& x);

  bool norm_first_;
  std::string activation_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

// A seed for a module that owns a Generator (Dropout), drawn from gen so one model seed determines them all.
uint64_t draw_seed(Generator& gen);

}  // namespace liftoff
