#include "models/train/optim.h"

#include <string>

#include "ops/optimizer_step/optimizer_step.h"
#include "runtime/autograd.h"
#include "runtime/error.h"

namespace liftoff {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  LIFTOFF_CHECK(lr >= 0, ValueError, "optimizer: learning rate must be >= 0, got ", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    LIFTOFF_CHECK(p.defined() && p.is_leaf() && is_floating(p.dtype()), ValueError, "optimizer: parameter ",
                  i, " must be a defined floating-point leaf tensor");
  }
}

void Optimizer::set_lr(double lr) {
  LIFTOFF_CHECK(lr >= 0, ValueError, "optimizer: learning rate must be >= 0, got ", lr);
  lr_ = lr;
  if (lr_tensor_.defined()) lr_tensor_.fill_(lr);
}

bool Optimizer::prepare_for_graph_capture(std::string* why) {
  if (why) *why = "this optimizer does not support CUDA graph capture";
  return false;
}

bool Optimizer::params_on_cuda(std::string* why) const {
  if (!params_.empty() && params_.front().device().is_cuda()) return true;
  if (why) *why = "the parameters are not on a CUDA device";
  return false;
}

void Optimizer::abort_capture() noexcept {
  for (const Tensor& p : params_) p.impl().grad.reset();
}

void Optimizer::zero_grad() {
  for (const auto& p : params_) p.set_grad(Tensor());
}

void Optimizer::step(const Tensor& skip_if_nonzero) {
  if (!skip_if_nonzero.defined() || skip_if_nonzero.item() == 0.0) step();
}

void Optimizer::follow_param_layouts(const std::vector<Tensor>& states) const {
  for (size_t i = 0; i < states.size() && i < params_.size(); ++i) {
    if (!same_dense_order(states[i], params_[i]))
      set_memory_format_in_place(states[i], params_[i].memory_format());
  }
}

std::vector<size_t> Optimizer::params_with_grad() const {
  std::vector<size_t> active;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined()) active.push_back(i);
  }
  return active;
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  LIFTOFF_CHECK(momentum >= 0, ValueError, "SGD: momentum must be >= 0, got ", momentum);
  LIFTOFF_CHECK(weight_decay >= 0, ValueError, "SGD: weight_decay must be >= 0, got ", weight_decay);
  LIFTOFF_CHECK(!nesterov || momentum > 0, ValueError, "SGD: Nesterov momentum requires momentum > 0");
  if (momentum > 0) {
    for (const auto& p : params_) momentum_buffers_.push_back(empty_like(p).zero_());
  }
}

void SGD::step() {
  step(Tensor());
}

void SGD::step(const Tensor& skip_if_nonzero) {
  NoGradGuard no_grad;
  follow_param_layouts(momentum_buffers_);
  std::vector<Tensor> params, grads, buffers;
  for (size_t i : params_with_grad()) {
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    if (momentum_ > 0) buffers.push_back(momentum_buffers_[i]);
  }
  if (params.empty()) return;
  SgdHyper hyper;
  hyper.lr = lr_;
  hyper.momentum = momentum_;
  hyper.weight_decay = weight_decay_;
  hyper.nesterov = nesterov_;
  hyper.lr_tensor = lr_tensor_;
  sgd_step(params, grads, buffers, hyper, skip_if_nonzero);
}

bool SGD::prepare_for_graph_capture(std::string* why) {
  if (!params_on_cuda(why)) return false;
  if (params_.front().dtype() != DType::f32) {  // the device learning rate is an f32 scalar
    if (why)
      *why = str_cat("SGD keeps the learning rate of ", dtype_name(params_.front().dtype()),
                     " parameters on the host");
    return false;
  }
  if (!lr_tensor_.defined()) lr_tensor_ = Tensor::full({1}, lr_, DType::f32, params_.front().device());
  return true;
}

NamedTensors SGD::named_state() const {
  NamedTensors out;
  for (size_t i = 0; i < momentum_buffers_.size(); ++i) {
    out.emplace_back("momentum_buffer." + std::to_string(i), momentum_buffers_[i]);
  }
  return out;
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
             double weight_decay)
    : Optimizer(std::move(params), lr), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  LIFTOFF_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, ValueError,
                "AdamW: betas must be in [0, 1), got (", beta1, ", ", beta2, ")");
  LIFTOFF_CHECK(eps >= 0, ValueError, "AdamW: eps must be >= 0, got ", eps);
  LIFTOFF_CHECK(weight_decay >= 0, ValueError, "AdamW: weight_decay must be >= 0, got ", weight_decay);
  for (const auto& p : params_) {
    exp_avg_.push_back(empty_like(p).zero_());
    exp_avg_sq_.push_back(empty_like(p).zero_());
    steps_.push_back(Tensor::zeros({}, DType::i64, p.device()));
  }
}

void AdamW::step() {
  step(Tensor());
}

void AdamW::step(const Tensor& skip_if_nonzero) {
  NoGradGuard no_grad;
  follow_param_layouts(exp_avg_);
  follow_param_layouts(exp_avg_sq_);
  std::vector<Tensor> params, grads, m, v, counts;
  for (size_t i : params_with_grad()) {
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
    counts.push_back(steps_[i]);
  }
  if (params.empty()) return;
  AdamWHyper hyper;
  hyper.lr = lr_;
  hyper.lr_tensor = lr_tensor_;
  hyper.beta1 = beta1_;
  hyper.beta2 = beta2_;
  hyper.eps = eps_;
  hyper.weight_decay = weight_decay_;
  hyper.step_counts = std::move(counts);
  adamw_step(params, grads, m, v, hyper, skip_if_nonzero);
}

bool AdamW::prepare_for_graph_capture(std::string* why) {
  if (!params_on_cuda(why)) return false;
  if (!lr_tensor_.defined()) lr_tensor_ = Tensor::full({1}, lr_, DType::f64, params_.front().device());
  return true;
}

NamedTensors AdamW::named_state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string index = std::to_string(i);
    out.emplace_back("exp_avg." + index, exp_avg_[i]);
    out.emplace_back("exp_avg_sq." + index, exp_avg_sq_[i]);
    out.emplace_back("step." + index, steps_[i]);
  }
  return out;
}

}  // namespace liftoff
