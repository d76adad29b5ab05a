// Reading the golden files that tools/reference/golden_*.py write from PyTorch (format in golden_resnet20.py:
// b"LFGD", version 1, named f32 / i64 / f64 tensors), and the error measure the golden tests use.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "runtime/error.h"

namespace liftoff::testing {

// tests/models/nn/data/<file>, under $LIFTOFF_SOURCE_DIR when ctest sets it, else beside this header.
inline std::string golden_path(const std::string& file) {
  const std::string relative = "tests/models/nn/data/" + file;
  if (const char* root = std::getenv("LIFTOFF_SOURCE_DIR")) return std::string(root) + "/" + relative;
  const std::string here = __FILE__;
  return here.substr(0, here.find_last_of('/')) + "/data/" + file;
}

namespace golden_detail {
template <class T>
Tensor read_values(const std::function<void(void*, size_t)>& read, const Shape& shape) {
  std::vector<T> values(static_cast<size_t>(shape_numel(shape)));
  read(values.data(), values.size() * sizeof(T));
  return Tensor::from_vector(values, shape);
}
}  // namespace golden_detail

// The tensors of a golden file in file order; IOError naming the file when it is missing or malformed.
inline NamedTensors read_golden(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot open " + path + " (run the tools/reference/golden_*.py that writes it)");
  const std::function<void(void*, size_t)> read = [&](void* dst, size_t n) {
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in) throw IOError(path + ": truncated file");
  };
  auto u32 = [&] {
    uint32_t v;
    read(&v, 4);
    return v;
  };
  char magic[4];
  read(magic, 4);
  if (std::memcmp(magic, "LFGD", 4) != 0) throw IOError(path + ": bad magic");
  if (u32() != 1) throw IOError(path + ": unsupported version");
  const uint32_t count = u32();
  NamedTensors out;
  for (uint32_t i = 0; i < count; ++i) {
    std::string name(u32(), '\0');
    read(name.data(), name.size());
    const uint32_t code = u32();
    Shape shape(u32());
    for (auto& d : shape) read(&d, 8);
    if (code == 0) {
      out.emplace_back(name, golden_detail::read_values<float>(read, shape));
    } else if (code == 1) {
      out.emplace_back(name, golden_detail::read_values<int64_t>(read, shape));
    } else if (code == 2) {
      out.emplace_back(name, golden_detail::read_values<double>(read, shape));
    } else {
      throw IOError(path + ": unknown dtype code " + std::to_string(code));
    }
  }
  return out;
}

// max |actual - expected| / max |expected| over the tensor (any dtype and device; compared in double);
// infinite when the sizes differ or any difference is NaN (a NaN must fail every tolerance).
inline double relative_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = actual.to(Device::cpu()).to_vector<double>();
  const std::vector<double> e = expected.to(Device::cpu()).to_vector<double>();
  if (a.size() != e.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - e[i]);
    if (std::isnan(d)) return INFINITY;
    diff = std::max(diff, d);
    scale = std::max(scale, std::abs(e[i]));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace liftoff::testing
