// Model weights from a safetensors file, for fine-tuning (`train --init-from`, evaluate/predict): a PyTorch
// state_dict saved with `safetensors.torch.save_file(model.state_dict(), path)` (PyTorch's names, which are
// Liftoff's), a state_dict of a DDP-wrapped model ("module." prefixes), or a Liftoff checkpoint (its model
// tensors). Matching is PyTorch's load_state_dict(strict=True): every missing, unexpected or mismatched name
// is listed in one error.
#pragma once
#include <string>
#include <vector>

#include "models/nn/module.h"

namespace liftoff {

// How a given set of named tensors differs from the one expected (names in the order they were met).
struct StateMismatch {
  std::vector<std::string> missing;     // expected, not given
  std::vector<std::string> unexpected;  // given, not expected
  std::vector<std::string> mismatched;  // "name: [2, 3] given, [3, 2] expected" (or the dtypes)
  bool empty() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // "missing 2 key(s): a, b; unexpected ...; size/dtype mismatch for ...;" with at most `limit` names each.
  std::string describe(size_t limit = 5) const;
};

// Compares names, shapes and (when check_dtype) dtypes.
StateMismatch match_state(const NamedTensors& given, const NamedTensors& expected, bool check_dtype = true);

// The model tensors of a safetensors file, with PyTorch state_dict names: a Liftoff checkpoint's model
// section, or every tensor of another file with a leading "module." (DDP) removed. Throws IOError naming the
// file.
StateDict read_model_weights(const std::string& path);

// Loads read_model_weights(path) into `model` (any floating dtype is cast to the model's). Everything is
// checked before the model is touched: a mismatch throws ValueError naming the file and listing missing,
// unexpected and shape-mismatched names, as PyTorch's load_state_dict(strict=True) does.
void load_model_weights(const std::string& path, Module& model);

}  // namespace liftoff
