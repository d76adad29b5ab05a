#include "models/nn/module.h"

#include <unordered_map>
#include <unordered_set>

#include "runtime/autograd.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

// Re-points t's impl at a converted copy of its data, so every handle sharing the impl sees the move.
void convert_in_place(const Tensor& t, Device device, DType dtype) {
  const DType target = is_floating(t.dtype()) ? dtype : t.dtype();
  if (t.device() == device && t.dtype() == target) return;
  adopt_in_place(t, t.to(device, target).contiguous());
  TensorImpl& impl = t.impl();
  if (impl.grad) {
    const Tensor grad(impl.grad);
    impl.grad = grad.to(device, target).impl_ptr();
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + ("\"" + names[i] + "\"");
  return out;
}

}  // namespace

void Module::check_new_name(const std::string& name, const char* what) const {
  LIFTOFF_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, type_name(), ": ", what,
                " name \"", name, "\" must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list) {
      if (entry.first == name) return true;
    }
    return false;
  };
  LIFTOFF_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), ValueError, type_name(),
                ": cannot register ", what, " \"", name, "\": the name is already used in this module");
}

Tensor Module::register_parameter(const std::string& name, const Tensor& t) {
  check_new_name(name, "parameter");
  if (!t.defined()) return t;
  LIFTOFF_CHECK(t.is_leaf(), ValueError, type_name(), ": parameter \"", name,
                "\" must be a leaf tensor (create it outside any recorded computation)");
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, const Tensor& t) {
  check_new_name(name, "buffer");
  LIFTOFF_CHECK(t.defined(), ValueError, type_name(), ": buffer \"", name, "\" is an undefined tensor");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  LIFTOFF_CHECK(module != nullptr, ValueError, type_name(), ": child module \"", name, "\" is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t.detach());
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t.detach());
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect_parameters("", out);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect_buffers("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& entry : named_parameters()) out.push_back(std::move(entry.second));
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& entry : named_buffers()) out.push_back(std::move(entry.second));
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& entry : named_parameters()) n += entry.second.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& entry : children_) entry.second->train(on);
}

void Module::to(Device device) {
  for (const auto& entry : named_parameters()) convert_in_place(entry.second, device, entry.second.dtype());
  for (const auto& entry : named_buffers()) convert_in_place(entry.second, device, entry.second.dtype());
}

void Module::to(DType dtype) {
  LIFTOFF_CHECK(is_floating(dtype), DTypeError, type_name(), ".to: target dtype must be floating point, got ",
                dtype_name(dtype));
  for (const auto& entry : named_parameters()) convert_in_place(entry.second, entry.second.device(), dtype);
  for (const auto& entry : named_buffers()) convert_in_place(entry.second, entry.second.device(), dtype);
}

void Module::to(Device device, DType dtype) {
  to(device);
  to(dtype);
}

void Module::to(MemoryFormat format) {
  const auto relayout = [format](const NamedTensors& entries) {
    for (const auto& entry : entries) {
      if (entry.second.dim() == 4 && is_floating(entry.second.dtype()))
        set_memory_format_in_place(entry.second, format);
    }
  };
  relayout(named_parameters());
  relayout(named_buffers());
}

void Module::zero_grad() {
  for (const auto& entry : named_parameters()) entry.second.set_grad(Tensor());
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  std::unordered_map<std::string, size_t> given;
  std::vector<std::string> duplicates;
  for (size_t i = 0; i < state.size(); ++i) {
    if (!given.emplace(state[i].first, i).second) duplicates.push_back(state[i].first);
  }
  LIFTOFF_CHECK(duplicates.empty(), ValueError, "load_state_dict(", type_name(), "): duplicate key(s) ",
                join(duplicates));

  std::vector<std::string> missing, mismatched;
  std::unordered_set<std::string> known;
  for (const auto& [name, t] : own) {
    known.insert(name);
    const auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& src = state[it->second].second;
    LIFTOFF_CHECK(src.defined(), ValueError, "load_state_dict(", type_name(), "): key \"", name,
                  "\" holds an undefined tensor");
    if (src.shape() != t.shape()) {
      mismatched.push_back(str_cat("\"", name, "\": checkpoint has ", shape_str(src.shape()),
                                   ", the model has ", shape_str(t.shape())));
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& entry : state) {
    if (!known.count(entry.first)) unexpected.push_back(entry.first);
  }
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string message = str_cat("load_state_dict(", type_name(), "): the state does not match the model.");
    if (!missing.empty()) message += str_cat(" Missing key(s): ", join(missing), ".");
    if (!unexpected.empty()) message += str_cat(" Unexpected key(s): ", join(unexpected), ".");
    throw ValueError(message + " Pass strict=false to load a partial state.");
  }
  if (!mismatched.empty()) {
    std::string message = str_cat("load_state_dict(", type_name(), "): shape mismatch for ");
    for (size_t i = 0; i < mismatched.size(); ++i) message += (i ? "; " : "") + mismatched[i];
    throw ShapeError(message);
  }

  NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    const auto it = given.find(name);
    if (it != given.end()) t.copy_(state[it->second].second);
  }
}

}  // namespace liftoff
