// Module: the base of every layer and model, like PyTorch's nn.Module. A module owns named parameters
// (leaves that require grad), named buffers (state that is saved but not trained, e.g. batch-norm running
// statistics) and named child modules, all kept in registration order. Names are dotted paths, exactly as
// PyTorch builds them ("layer1.0.conv1.weight"), so state dicts line up with PyTorch checkpoints.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// An ordered list of (name, tensor): the order is the registration order PyTorch would produce.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules are shared through handles (children are shared_ptr); copying one would alias its tensors.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation of a single-input module.
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // The class name, used in error messages ("BatchNorm2d").
  virtual std::string type_name() const { return "Module"; }

  // Recursive, dotted names, registration order: own entries first, then each child's.
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  int64_t num_parameters() const;

  // Training mode (dropout active, batch norm uses and updates batch statistics), recursive.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer in place (the handles users hold stay valid and keep their identity;
  // parameters stay leaves that require grad). Gradients move along. The dtype overload converts only
  // floating-point tensors (num_batches_tracked stays i64), like PyTorch's module.to(dtype).
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);
  // Lays every 4-D floating parameter and buffer out in `format`, in place (PyTorch's
  // module.to(memory_format=...)): channels_last stores convolution weights in the order cuDNN's
  // channels-last kernels read them (KRSC), so a step reads them without a copy and their gradients arrive in
  // that layout. Values are unchanged. Optimizer states follow their parameter's layout at the optimizer's
  // next step.
  void to(MemoryFormat format);

  // Drops every parameter gradient (set_to_none, PyTorch's default).
  void zero_grad();

  // Per module: own parameters, own buffers, then each child's entries. Values are detached handles sharing
  // the live storage (copy them to snapshot).
  StateDict state_dict() const;
  // Copies values in place (converting dtype/device). strict: every key of the model must be present and no
  // other key may appear. Shapes must match in any mode. All checks run before anything is copied, so a
  // failed load leaves the model untouched. Throws ValueError (keys) or ShapeError (shapes) naming every bad
  // key.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registration, normally from a constructor. Names are non-empty, without dots, unique within the module.
  // register_parameter makes t a leaf that requires grad; an undefined tensor is not registered (bias=false).
  Tensor register_parameter(const std::string& name, const Tensor& t);
  Tensor register_buffer(const std::string& name, const Tensor& t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  void collect_parameters(const std::string& prefix, NamedTensors& out) const;
  void collect_buffers(const std::string& prefix, NamedTensors& out) const;
  void collect_state(const std::string& prefix, StateDict& out) const;

  bool training_ = true;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace liftoff
