// Layers: modules around the ops of ops/, with PyTorch's parameter names, shapes and default initialisation.
// Layers with random initial weights take a Generator and draw from it in construction order (weight, then
// bias), so one seed determines a whole model. Conv2d and Linear use PyTorch's default
// kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias alike.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "runtime/autocast.h"
#include "models/nn/module.h"
#include "runtime/random.h"

namespace liftoff {

// weight [out, in, k, k], bias [out] (when bias); square kernel, stride and zero padding. forward: x [N, in,
// H, W] -> [N, out, (H + 2p - k)/stride + 1, (W + 2p - k)/stride + 1] (ops/conv2d/conv2d.h); under autocast
// in the half dtype, and on CUDA channels-last (the runtime's layout choice, conv2d_memory_format).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
         bool bias, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  int64_t stride_, padding_;
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

}  // namespace liftoff
