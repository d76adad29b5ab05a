#include "models/train/weights.h"

#include <unordered_map>
#include <unordered_set>

#include "models/train/checkpoint.h"
#include "models/train/safetensors.h"

namespace liftoff {

namespace {

std::string first_names(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += str_cat(" and ", names.size() - limit, " more");
  return out;
}

bool same_kind(DType a, DType b) {
  return a == b || (is_floating(a) && is_floating(b));
}

}  // namespace

std::string StateMismatch::describe(size_t limit) const {
  std::string out;
  if (!missing.empty())
    out += str_cat(" missing ", missing.size(), " key(s): ", first_names(missing, limit), ";");
  if (!unexpected.empty())
    out += str_cat(" unexpected ", unexpected.size(), " key(s): ", first_names(unexpected, limit), ";");
  if (!mismatched.empty()) out += str_cat(" size/dtype mismatch for ", first_names(mismatched, limit), ";");
  return out;
}

StateMismatch match_state(const NamedTensors& given, const NamedTensors& expected, bool check_dtype) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : given) by_name.emplace(name, &t);
  StateMismatch out;
  std::unordered_set<std::string> known;
  for (const auto& [name, own] : expected) {
    known.insert(name);
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      out.missing.push_back(name);
      continue;
    }
    const Tensor& t = *it->second;
    if (t.shape() != own.shape()) {
      out.mismatched.push_back(
          str_cat(name, ": ", shape_str(t.shape()), " given, ", shape_str(own.shape()), " expected"));
    } else if (check_dtype ? t.dtype() != own.dtype() : !same_kind(t.dtype(), own.dtype())) {
      out.mismatched.push_back(
          str_cat(name, ": ", dtype_name(t.dtype()), " given, ", dtype_name(own.dtype()), " expected"));
    }
  }
  for (const auto& entry : given) {
    if (!known.count(entry.first)) out.unexpected.push_back(entry.first);
  }
  return out;
}

StateDict read_model_weights(const std::string& path) {
  const auto meta = read_safetensors_metadata(path);
  if (meta.count("liftoff.format")) {
    CheckpointState state = load_checkpoint(path);
    return std::move(state.model);
  }
  SafetensorsFile file = read_safetensors(path);
  StateDict out;
  const std::string ddp = "module.";
  for (auto& [name, t] : file.tensors) {
    out.emplace_back(name.compare(0, ddp.size(), ddp) == 0 ? name.substr(ddp.size()) : name, std::move(t));
  }
  return out;
}

void load_model_weights(const std::string& path, Module& model) {
  const StateDict weights = read_model_weights(path);
  const StateMismatch mismatch = match_state(weights, model.state_dict(), /*check_dtype=*/false);
  LIFTOFF_CHECK(
      mismatch.empty(), ValueError, "weights '", path, "' do not fit the model (", model.type_name(),
      "):", mismatch.describe(8),
      " pass a state_dict of the same architecture (PyTorch names, e.g. 'layer1.0.conv1.weight') or "
      "another --model");
  model.load_state_dict(weights, true);
}

}  // namespace liftoff
