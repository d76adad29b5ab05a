// Helpers of the checkpoint and safetensors tests (tests/models/train): a per-test temporary directory,
// whole-file reads and writes, byte-exact tensor comparison, and the error-message check.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/train/safetensors.h"
#include "tests/common/temp_dir.h"

namespace liftoff::testing {

namespace fs = std::filesystem;

// A fresh directory per test for checkpoint and safetensors files.
class CheckpointDir : public TempDir {
 public:
  CheckpointDir() : TempDir("liftoff_ckpt_test") {}
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a raw JSON header and a data section.
inline std::string raw_file(const std::string& header, const std::string& data,
                            uint64_t declared_len = UINT64_MAX) {
  const uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xFF);
  return out + header + data;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

inline void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(same_bytes(a[i].second, b[i].second)) << a[i].first;
  }
}

// Expects `fn` to throw E whose message names `file` and contains `fragment`, on one line.
template <class E, class F>
void expect_error(F&& fn, const std::string& file, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one mentioning '" << fragment << "'";
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what << "\n  expected fragment: " << fragment;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace liftoff::testing
