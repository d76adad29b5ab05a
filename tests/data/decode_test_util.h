// Helpers of the data/decode tests: fixture files, temporary folders, small synthetic images.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/image_io.h"

namespace liftoff::decode_test {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

inline std::string source_path(const std::string& relative) {
  if (const char* root = std::getenv("LIFTOFF_SOURCE_DIR")) return std::string(root) + "/" + relative;
  const std::string here = __FILE__;  // <root>/tests/data/decode_test_util.h
  return here.substr(0, here.rfind("/tests/data/")) + "/" + relative;
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::string jpeg_fixture(const std::string& name) {
  return source_path("tests/data/jpeg/" + name);
}

// tests/data/jpeg/make_jpegs.cpp's files (31x23, pixels 16 + 2x + 2y + 40c), except the arithmetic-coded one.
inline const std::vector<std::string>& valid_jpegs() {
  static const std::vector<std::string> names = {"baseline-420.jpg",
                                                 "baseline-422.jpg",
                                                 "baseline-440.jpg",
                                                 "baseline-444.jpg",
                                                 "gray.jpg",
                                                 "cmyk.jpg",
                                                 "optimized-420.jpg",
                                                 "restart-420.jpg",
                                                 "restart-gray.jpg",
                                                 "progressive-420.jpg",
                                                 "progressive-444.jpg",
                                                 "progressive-gray.jpg",
                                                 "progressive-restart-420.jpg",
                                                 "scan-per-component-420.jpg"};
  return names;
}

// A smooth RGB test picture (CHW) with some texture, different per seed.
inline std::vector<uint8_t> picture(int64_t height, int64_t width, int seed) {
  std::vector<uint8_t> chw(static_cast<size_t>(3 * height * width));
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        const int64_t v = (40 * c + 3 * x + 2 * y + 17 * seed + ((x / 7 + y / 5) % 2) * 30) % 256;
        chw[static_cast<size_t>((c * height + y) * width + x)] = static_cast<uint8_t>(v);
      }
    }
  }
  return chw;
}

// A fresh temporary folder named after the running test, removed at the end.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("liftoff_decode_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace liftoff::decode_test
