#include "models/train/ema.h"

#include <algorithm>

#include "ops/ema/ema.h"
#include "runtime/autocast.h"

namespace liftoff {

ModelEma::ModelEma(Module& model, EmaOptions options) : options_(options) {
  LIFTOFF_CHECK(options_.decay >= 0.0 && options_.decay < 1.0, ValueError, "EMA decay ", options_.decay,
                " must lie in [0, 1) (e.g. 0.999: about the last 1000 steps)");
  NamedTensors tensors = model.named_parameters();
  if (options_.average_buffers) {
    for (const auto& [name, buffer] : model.named_buffers()) {
      if (buffer.dtype() == DType::f32 || buffer.dtype() == DType::f64) tensors.emplace_back(name, buffer);
    }
  }
  for (const auto& [name, t] : tensors) {
    LIFTOFF_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError, "EMA: '", name, "' is ",
                  dtype_name(t.dtype()),
                  "; only f32 or f64 weights can be averaged (keep f32 master weights)");
    const Tensor copy = empty_like(t);
    copy.copy_(t);
    averages_.emplace_back(name, copy);
    // The live handle (not a detached one): where Module::to(MemoryFormat) re-lays a weight out later, the
    // average sees the new storage and follows its layout (follow_model_layouts).
    model_tensors_.push_back(t);
    averaged_.push_back(copy);
  }
  // The same checks the update makes, now rather than at the first step (mixed dtypes or devices).
  ema_update(averaged_, model_tensors_, 1.0);
}

void ModelEma::follow_model_layouts() {
  for (size_t i = 0; i < averaged_.size(); ++i) {
    if (!same_dense_order(averaged_[i], model_tensors_[i]))
      set_memory_format_in_place(averaged_[i], model_tensors_[i].memory_format());
  }
}

void ModelEma::update() {
  follow_model_layouts();
  ema_update(averaged_, model_tensors_, options_.decay);
}

void ModelEma::swap_with_model() {
  follow_model_layouts();
  swap_contents(model_tensors_, averaged_);
  advance_weight_version();
}

namespace {
constexpr const char* kEmaPrefix = "ema.";

const Tensor* find_extra(const CheckpointState& state, const std::string& name) {
  for (const auto& [key, value] : state.extra) {
    if (key == name) return &value;
  }
  return nullptr;
}
}  // namespace

void capture_ema(const ModelEma& ema, CheckpointState& state) {
  for (const auto& [name, t] : ema.named_averages()) state.extra.emplace_back(kEmaPrefix + name, t);
}

bool holds_ema(const CheckpointState& state) {
  return std::any_of(state.extra.begin(), state.extra.end(),
                     [](const auto& entry) { return entry.first.rfind(kEmaPrefix, 0) == 0; });
}

bool holds_buffer_averages(const CheckpointState& state, const Module& model) {
  const NamedTensors buffers = model.named_buffers();
  return std::any_of(buffers.begin(), buffers.end(), [&](const auto& buffer) {
    return find_extra(state, kEmaPrefix + buffer.first) != nullptr;
  });
}

void restore_ema(const CheckpointState& state, ModelEma* ema) {
  if (ema == nullptr) {
    for (const auto& entry : state.extra) {
      LIFTOFF_CHECK(entry.first.rfind(kEmaPrefix, 0) != 0, ValueError, "checkpoint '", state.path,
                    "' holds an EMA of the weights ('", entry.first,
                    "'); resume with --ema (the same decay) to continue it");
    }
    return;
  }
  for (const auto& [name, t] : ema->named_averages()) {
    const Tensor* saved = find_extra(state, kEmaPrefix + name);
    LIFTOFF_CHECK(saved != nullptr, ValueError, "checkpoint '", state.path, "' has no EMA average '",
                  kEmaPrefix, name,
                  "' (written without --ema, or with another --ema-buffers); resume with "
                  "the flags of the run that wrote it");
    LIFTOFF_CHECK(saved->shape() == t.shape() && saved->dtype() == t.dtype(), ValueError, "checkpoint '",
                  state.path, "': its EMA average '", kEmaPrefix, name, "' is ", dtype_name(saved->dtype()),
                  " ", shape_str(saved->shape()), ", this run's is ", dtype_name(t.dtype()), " ",
                  shape_str(t.shape()));
  }
  for (const auto& [name, t] : ema->named_averages()) t.copy_(*find_extra(state, kEmaPrefix + name));
}

}  // namespace liftoff
