#include "models/nn/layers.h"

#include <cmath>
#include <utility>

#include "ops/cast/cast.h"
#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

// PyTorch's reset_parameters for Conv/Linear: kaiming_uniform(a=sqrt(5)) gives bound 1/sqrt(fan_in), and the
// bias uses the same bound.
Tensor uniform_init(const Shape& shape, int64_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return rand_uniform(shape, gen, -bound, bound);
}

void check_positive(int64_t value, const char* layer, const char* what) {
  LIFTOFF_CHECK(value > 0, ValueError, layer, ": ", what, " must be positive, got ", value);
}

void check_conv_args(const char* layer, int64_t in_channels, int64_t out_channels, int64_t kernel,
                     int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  check_positive(in_channels, layer, "in_channels");
  check_positive(out_channels, layer, "out_channels");
  check_positive(kernel, layer, "kernel");
  check_positive(stride, layer, "stride");
  check_positive(dilation, layer, "dilation");
  check_positive(groups, layer, "groups");
  LIFTOFF_CHECK(padding >= 0, ValueError, layer, ": padding must be >= 0, got ", padding);
  LIFTOFF_CHECK(in_channels % groups == 0 && out_channels % groups == 0, ValueError, layer, ": in_channels (",
                in_channels, ") and out_channels (", out_channels, ") must both be divisible by groups (",
                groups, ")");
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
               bool bias, Generator& gen, int64_t dilation, int64_t groups)
    : stride_(stride), padding_(padding), dilation_(dilation), groups_(groups) {
  check_conv_args("Conv2d", in_channels, out_channels, kernel, stride, padding, dilation, groups);
  const int64_t fan_in = in_channels / groups * kernel * kernel;
  weight_ = register_parameter(
      "weight", uniform_init({out_channels, in_channels / groups, kernel, kernel}, fan_in, gen));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_channels}, fan_in, gen));
}

Tensor Conv2d::forward(const Tensor& x) {
  DType half = DType::f32;
  if (autocast_enabled(&half)) {
    // The half weight is cached once per optimizer step in the layout conv2d computes in (KRSC under
    // autocast on CUDA, where activations run channels-last): conv2d then converts nothing per call.
    const MemoryFormat weight_format = conv2d_memory_format(x);
    return conv2d(cast(x, half), weight_half_.get(weight_, half, weight_format), bias_half_.get(bias_, half),
                  stride_, padding_, dilation_, groups_);
  }
  return conv2d(x, weight_, bias_, stride_, padding_, dilation_, groups_);
}

BatchNorm2d::BatchNorm2d(int64_t channels, double eps, double momentum) : eps_(eps), momentum_(momentum) {
  check_positive(channels, "BatchNorm2d", "channels");
  LIFTOFF_CHECK(eps > 0, ValueError, "BatchNorm2d: eps must be positive, got ", eps);
  LIFTOFF_CHECK(momentum >= 0 && momentum <= 1, ValueError, "BatchNorm2d: momentum must be in [0, 1], got ",
                momentum);
  weight_ = register_parameter("weight", Tensor::ones({channels}));
  bias_ = register_parameter("bias", Tensor::zeros({channels}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var_ = register_buffer("running_var", Tensor::ones({channels}));
  num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  return batch_norm2d(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_,
                      num_batches_tracked_);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x, const Tensor& residual) {
  return batch_norm2d_relu(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_,
                           residual, num_batches_tracked_);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen) {
  check_positive(in_features, "Linear", "in_features");
  check_positive(out_features, "Linear", "out_features");
  weight_ = register_parameter("weight", uniform_init({out_features, in_features}, in_features, gen));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_features}, in_features, gen));
}

Tensor Linear::forward(const Tensor& x) {
  DType half = DType::f32;
  if (autocast_enabled(&half))
    return linear(cast(x, half), weight_half_.get(weight_, half), bias_half_.get(bias_, half));
  return linear(x, weight_, bias_);
}

Tensor ReLU::forward(const Tensor& x) {
  return relu(x);
}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : kernel_(kernel), stride_(stride < 1 ? kernel : stride), padding_(padding) {
  check_positive(kernel, "MaxPool2d", "kernel");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_, stride_, padding_);
}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : kernel_(kernel), stride_(stride < 1 ? kernel : stride), padding_(padding) {
  check_positive(kernel, "AvgPool2d", "kernel");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_, stride_, padding_);
}

Tensor GlobalAvgPool::forward(const Tensor& x) {
  return global_avg_pool2d(x);
}

Tensor Flatten::forward(const Tensor& x) {
  return flatten(x, start_dim_);
}

Dropout::Dropout(double p, uint64_t seed) : p_(p), gen_(seed) {
  LIFTOFF_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p_, is_training(), gen_);
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& entry : named_children()) y = entry.second->forward(y);
  return y;
}

Module& Sequential::operator[](size_t i) const {
  LIFTOFF_CHECK(i < size(), ValueError, "Sequential: index ", i, " out of range for ", size(), " modules");
  return *named_children()[i].second;
}

uint64_t draw_seed(Generator& gen) {
  // 2^53: every integer below it is exact in a double.
  return static_cast<uint64_t>(rand_uniform({}, gen, 0.0, 9007199254740992.0, DType::f64).item());
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                                 int64_t padding, int64_t output_padding, bool bias, Generator& gen,
                                 int64_t groups, int64_t dilation)
    : stride_(stride),
      padding_(padding),
      output_padding_(output_padding),
      groups_(groups),
      dilation_(dilation) {
  check_conv_args("ConvTranspose2d", in_channels, out_channels, kernel, stride, padding, dilation, groups);
  LIFTOFF_CHECK(output_padding >= 0 && output_padding < stride, ValueError,
                "ConvTranspose2d: output_padding must be in [0, stride = ", stride, "), got ",
                output_padding);
  const int64_t fan_in = out_channels / groups * kernel * kernel;  // PyTorch: weight.size(1) * k * k
  weight_ = register_parameter(
      "weight", uniform_init({in_channels, out_channels / groups, kernel, kernel}, fan_in, gen));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_channels}, fan_in, gen));
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  DType half = DType::f32;
  if (autocast_enabled(&half))
    return conv_transpose2d(cast(x, half), weight_half_.get(weight_, half), bias_half_.get(bias_, half),
                            stride_, padding_, output_padding_, groups_, dilation_);
  return conv_transpose2d(x, weight_, bias_, stride_, padding_, output_padding_, groups_, dilation_);
}

LayerNorm::LayerNorm(const Shape& normalized_shape, double eps, bool elementwise_affine, bool bias)
    : normalized_shape_(normalized_shape), eps_(eps) {
  LIFTOFF_CHECK(!normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  for (const int64_t d : normalized_shape) check_positive(d, "LayerNorm", "every normalized_shape size");
  LIFTOFF_CHECK(eps > 0, ValueError, "LayerNorm: eps must be positive, got ", eps);
  if (!elementwise_affine) return;
  weight_ = register_parameter("weight", Tensor::ones(normalized_shape));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros(normalized_shape));
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape_, weight_, bias_, eps_);
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : num_groups_(num_groups), eps_(eps) {
  check_positive(num_groups, "GroupNorm", "num_groups");
  check_positive(num_channels, "GroupNorm", "num_channels");
  LIFTOFF_CHECK(num_channels % num_groups == 0, ValueError, "GroupNorm: num_channels (", num_channels,
                ") must be divisible by num_groups (", num_groups, ")");
  LIFTOFF_CHECK(eps > 0, ValueError, "GroupNorm: eps must be positive, got ", eps);
  if (!affine) return;
  weight_ = register_parameter("weight", Tensor::ones({num_channels}));
  bias_ = register_parameter("bias", Tensor::zeros({num_channels}));
}

Tensor GroupNorm::forward(const Tensor& x) {
  return group_norm(x, num_groups_, weight_, bias_, eps_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen,
                     std::optional<int64_t> padding_idx) {
  check_positive(num_embeddings, "Embedding", "num_embeddings");
  check_positive(embedding_dim, "Embedding", "embedding_dim");
  if (padding_idx) {
    LIFTOFF_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, ValueError,
                  "Embedding: padding_idx ", *padding_idx, " must be in [-", num_embeddings, ", ",
                  num_embeddings, ")");
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  const Tensor weight = randn({num_embeddings, embedding_dim}, gen);
  if (padding_idx_) weight.select(0, *padding_idx_).zero_();
  weight_ = register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(indices, weight_, padding_idx_);
}

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  LIFTOFF_CHECK(approximate_ == "none" || approximate_ == "tanh", ValueError,
                "GELU: approximate must be \"none\" or \"tanh\", got \"", approximate_, "\"");
}

Tensor GELU::forward(const Tensor& x) {
  return gelu(x, approximate_);
}
Tensor SiLU::forward(const Tensor& x) {
  return silu(x);
}
Tensor ReLU6::forward(const Tensor& x) {
  return relu6(x);
}
Tensor Hardswish::forward(const Tensor& x) {
  return hardswish(x);
}
Tensor Sigmoid::forward(const Tensor& x) {
  return sigmoid(x);
}
Tensor Tanh::forward(const Tensor& x) {
  return tanh(x);
}
Tensor Identity::forward(const Tensor& x) {
  return x;
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::vector<int64_t> output_size)
    : output_size_(std::move(output_size)) {
  LIFTOFF_CHECK(output_size_.size() == 1 || output_size_.size() == 2, ValueError,
                "AdaptiveAvgPool2d: output_size must have 1 or 2 entries, got ", output_size_.size());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, output_size_);
}

Upsample::Upsample(std::vector<int64_t> size, std::vector<double> scale_factor, std::string mode,
                   std::optional<bool> align_corners)
    : size_(std::move(size)),
      scale_factor_(std::move(scale_factor)),
      mode_(std::move(mode)),
      align_corners_(align_corners) {
  LIFTOFF_CHECK(size_.empty() != scale_factor_.empty(), ValueError,
                "Upsample: give exactly one of size and scale_factor");
  LIFTOFF_CHECK(mode_ == "nearest" || mode_ == "bilinear", ValueError,
                "Upsample: mode must be \"nearest\" or \"bilinear\", got \"", mode_, "\"");
}

Tensor Upsample::forward(const Tensor& x) {
  return interpolate(x, size_, scale_factor_, mode_, align_corners_);
}

}  // namespace liftoff
