// Reverse-mode autograd: a dynamic tape of Nodes. An op front computes its result, then (when any input
// requires grad and grad mode is on) records one FunctionNode whose closure maps the output gradient to input
// gradients (an op of several results, such as split's pieces, records one node for all of them). Closures
// must capture only what backward needs, and capture tensors detached (x.detach()): a node that holds its own
// output with grad_fn set would keep itself alive.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

class Node {
 public:
  virtual ~Node() = default;
  // Gradients for each input edge (undefined where the input needs none).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // How many results the op had; a node of several gets one gradient per result (undefined where none
  // arrived) through apply_outputs.
  virtual int outputs() const { return 1; }
  virtual std::vector<Tensor> apply_outputs(const std::vector<Tensor>& grad_outputs) {
    return apply(grad_outputs[0]);
  }
  // Frees saved tensors once backward has passed (unless the graph is retained).
  virtual void release() {}
  virtual std::string name() const = 0;
  // A leaf's accumulator: the leaf's dtype, in which the gradients reaching it are summed.
  virtual std::optional<DType> leaf_dtype() const { return std::nullopt; }
  // A leaf's accumulator whose leaf has gradient-ready hooks (they read .grad the moment it is set).
  virtual bool has_grad_hooks() const { return false; }
  // One entry per op input: the node that receives that input's gradient, or null, and which of that
  // node's outputs the input was (0 unless it has several).
  std::vector<std::shared_ptr<Node>> next;
  std::vector<int> next_output;
};

using NeedsGrad = std::vector<bool>;
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const NeedsGrad& needs_grad)>;
// An op of several results: one gradient per result (undefined where that result got none).
using MultiBackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const NeedsGrad& needs_grad)>;

class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn, NeedsGrad needs)
      : name_(std::move(name)), fn_(std::move(fn)), needs_(std::move(needs)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override { fn_ = nullptr; }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  BackwardFn fn_;
  NeedsGrad needs_;
};

class MultiFunctionNode : public Node {
 public:
  MultiFunctionNode(std::string name, MultiBackwardFn fn, NeedsGrad needs, int outputs)
      : name_(std::move(name)), fn_(std::move(fn)), needs_(std::move(needs)), outputs_(outputs) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override { return apply_outputs({grad_output}); }
  std::vector<Tensor> apply_outputs(const std::vector<Tensor>& grad_outputs) override;
  int outputs() const override { return outputs_; }
  void release() override { fn_ = nullptr; }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  MultiBackwardFn fn_;
  NeedsGrad needs_;
  int outputs_;
};

// Sums incoming gradients into a leaf's .grad, then runs the leaf's gradient-ready hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::optional<DType> leaf_dtype() const override;
  bool has_grad_hooks() const override;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// Grad mode is per thread, on by default.
class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and any defined input requires grad.
bool should_record(const std::vector<Tensor>& inputs);

// Records `output` as produced from `inputs` by `name`; `backward` returns one gradient per input.
// Call only when should_record(inputs).
void record(const Tensor& output, const std::string& name, const std::vector<Tensor>& inputs,
            BackwardFn backward);
// The same for an op of several results (one node; result i is its output i).
void record(const std::vector<Tensor>& outputs, const std::string& name, const std::vector<Tensor>& inputs,
            MultiBackwardFn backward);

// Inside a node's backward: the gradient that already arrived for the node's input `input` from another
// branch (a residual block's skip path), when the op may add its own gradient into it in place and return
// it. The engine then keeps that tensor as the sum and skips its own sum, which reads both gradients and
// writes a third tensor: a convolution's data gradient written by cuDNN with beta = 1 saves two of those
// three passes over memory. Undefined when nothing waits, or it may not be written: it is shared with
// another tensor, still being written on the side lane, or a leaf's (whose sums may widen the dtype).
// An op that takes it must add, never overwrite, and must not return it for any other input.
Tensor waiting_gradient(size_t input);

// The node that receives gradients for t (its grad_fn, or its leaf accumulator), or null.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// Runs backward from root; grad_output defaults to ones for a one-element root.
void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph = false);

}  // namespace liftoff
