// libFuzzer harness for the safetensors reader and the checkpoint loader (models/train/safetensors.h,
// models/train/checkpoint.h). Properties checked beyond "no crash, no sanitizer report, only liftoff::Error":
//   - the in-memory parser and the file reader agree (both reject, or both return the same tensors);
//   - an accepted file re-serialises to bytes that parse back to the same tensors and metadata.
#include <cstdint>
#include <cstring>
#include <string>

#include "models/train/checkpoint.h"
#include "models/train/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace liftoff;

bool same(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor& x = a.tensors[i].second;
    const Tensor& y = b.tensors[i].second;
    if (a.tensors[i].first != b.tensors[i].first || x.dtype() != y.dtype() || x.shape() != y.shape() ||
        (x.nbytes() > 0 && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("safetensors") + ".safetensors";
  const std::string name = "fuzz-input";
  bool memory_ok = false;
  SafetensorsFile from_memory;
  try {
    from_memory = parse_safetensors(data, size, name);
    memory_ok = true;
  } catch (const Error& e) {
    fuzz::check_error(e, name);
  }

  fuzz::write_bytes(path, data, size);
  bool file_ok = false;
  try {
    const SafetensorsFile from_file = read_safetensors(path);
    file_ok = true;
    if (memory_ok && !same(from_memory, from_file))
      fuzz::invariant_failed("memory and file readers disagree");
  } catch (const Error& e) {
    fuzz::check_error(e, path);
  }
  if (memory_ok != file_ok) fuzz::invariant_failed("memory and file readers disagree on acceptance");

  if (memory_ok) {
    const std::string again = safetensors_bytes(from_memory.tensors, from_memory.metadata);
    try {
      if (!same(parse_safetensors(again.data(), again.size(), name), from_memory))
        fuzz::invariant_failed("re-serialised file differs");
    } catch (const Error&) {
      fuzz::invariant_failed("re-serialised file is rejected");
    }
    try {
      load_checkpoint(path);
    } catch (const Error& e) {
      fuzz::check_error(e, path);
    }
  }
  return 0;
}
