#include "models/nn/layers.h"

#include <cmath>

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

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
               bool bias, Generator& gen)
    : stride_(stride), padding_(padding) {
  check_positive(in_channels, "Conv2d", "in_channels");
  check_positive(out_channels, "Conv2d", "out_channels");
  check_positive(kernel, "Conv2d", "kernel");
  check_positive(stride, "Conv2d", "stride");
  LIFTOFF_CHECK(padding >= 0, ValueError, "Conv2d: padding must be >= 0, got ", padding);
  const int64_t fan_in = in_channels * kernel * kernel;
  weight_ =
      register_parameter("weight", uniform_init({out_channels, in_channels, kernel, kernel}, fan_in, gen));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_channels}, fan_in, gen));
}

Tensor Conv2d::forward(const Tensor& x) {
  DType half = DType::f32;
  if (autocast_enabled(&half)) {
    // The half weight is cached once per optimizer step in the layout conv2d computes in (KRSC under
    // autocast on CUDA, where activations run channels-last): conv2d then converts nothing per call.
    const MemoryFormat weight_format = conv2d_memory_format(x);
    return conv2d(cast(x, half), weight_half_.get(weight_, half, weight_format), bias_half_.get(bias_, half),
                  stride_, padding_);
  }
  return conv2d(x, weight_, bias_, stride_, padding_);
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

}  // namespace liftoff
