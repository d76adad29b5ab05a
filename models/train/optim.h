// Optimizers with PyTorch's update rules, running the fused multi-tensor kernels of ops/optimizer_step.
// State tensors are allocated at construction on each parameter's device (build the optimizer after
// model.to(device)). Parameters whose grad is undefined are skipped by step(), as in PyTorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "runtime/capture.h"
#include "runtime/tensor.h"

namespace liftoff {

class Optimizer : public CaptureParticipant {
 public:
  // params: floating-point leaves (Module::parameters()); lr >= 0. Throws ValueError otherwise.
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, without autograd.
  virtual void step() = 0;
  // The same update, skipped when skip_if_nonzero (a one-element f32 tensor, AMP's found_inf) is non-zero.
  // SGD and AdamW decide on the device (no host sync); this default reads the flag on the host, so an
  // optimizer that does not override it is still correct, only slower.
  virtual void step(const Tensor& skip_if_nonzero);
  // Drops every parameter gradient (set_to_none, PyTorch's default).
  void zero_grad();
  double lr() const { return lr_; }
  // lr >= 0; what LR schedules drive, once per step. With the LR kept on the device, this also queues a
  // write of the new value there (in stream order, before the next step's kernels).
  void set_lr(double lr);
  // CUDA graphs: keeps the learning rate in a one-element device tensor that step() reads on the device,
  // so a captured step follows set_lr(). False (with the reason in *why) for an optimizer whose step
  // depends on host state that changes between steps, or parameters not on CUDA. The default says no.
  virtual bool prepare_for_graph_capture(std::string* why);
  // A participant of captured steps (runtime/capture.h): a failed capture leaves the half-recorded step's
  // gradients behind; they are dropped.
  void abort_capture() noexcept override;
  const std::vector<Tensor>& params() const { return params_; }
  // The live state tensors by name ("momentum_buffer.<i>", "exp_avg.<i>", ... with i the parameter's index):
  // a checkpoint writer reads them, a loader copy_()s into them.
  virtual NamedTensors named_state() const = 0;

 protected:
  // Indices of the parameters that have a gradient now.
  std::vector<size_t> params_with_grad() const;
  // For prepare_for_graph_capture: true when the parameters are on CUDA, else false with the reason.
  bool params_on_cuda(std::string* why) const;
  // A per-parameter state (momentum, moments) re-laid out where its parameter's layout changed since it was
  // made (Module::to(MemoryFormat) after the optimizer): the fused steps pair their storage element by
  // element.
  void follow_param_layouts(const std::vector<Tensor>& states) const;

  std::vector<Tensor> params_;
  double lr_;
  Tensor lr_tensor_;  // defined once prepare_for_graph_capture succeeded
};

// torch.optim.SGD (dampening 0): momentum buffers exist only when momentum > 0.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.0, double weight_decay = 0.0,
      bool nesterov = false);
  void step() override;
  void step(const Tensor& skip_if_nonzero) override;
  NamedTensors named_state() const override;
  bool prepare_for_graph_capture(std::string* why) override;

 private:
  double momentum_, weight_decay_;
  bool nesterov_;
  std::vector<Tensor> momentum_buffers_;
};

// torch.optim.AdamW (amsgrad off), capturable as torch's `capturable=True`: each parameter counts its own
// updates ("step.<i>", an i64 scalar on the parameter's device) for bias correction, as PyTorch does, so a
// parameter skipped for lack of a gradient does not advance. On CUDA the counts live on the device and the
// fused kernel advances them and computes the bias corrections there: no host sync, and a replayed CUDA graph
// advances them. A step skipped by step(skip_if_nonzero) (AMP's inf check) advances no count, as PyTorch's
// GradScaler skips optimizer.step() altogether.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2);
  void step() override;
  void step(const Tensor& skip_if_nonzero) override;
  NamedTensors named_state() const override;
  // True for parameters on CUDA: the learning rate then goes to the device as an f64 scalar (its exact
  // value).
  bool prepare_for_graph_capture(std::string* why) override;

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_, steps_;
};

}  // namespace liftoff
