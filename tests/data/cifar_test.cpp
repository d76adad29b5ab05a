#include "data/cifar.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace liftoff {
namespace {

namespace fs = std::filesystem;

class CifarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("liftoff_cifar_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Record r of a file: label labels[r], pixel k = (seed + 7 r + k) mod 256.
  std::string write(const std::string& name, const std::vector<uint8_t>& labels, int seed, size_t extra = 0) {
    const std::string path = (root_ / name).string();
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path, std::ios::binary);
    for (size_t r = 0; r < labels.size(); ++r) {
      out.put(static_cast<char>(labels[r]));
      for (int k = 0; k < 3072; ++k) out.put(static_cast<char>((seed + 7 * static_cast<int>(r) + k) & 255));
    }
    for (size_t i = 0; i < extra; ++i) out.put(0);
    return path;
  }
  fs::path root_;
};

TEST_F(CifarTest, ReadsRecordsInOrder) {
  const auto a = write("a.bin", {3, 9, 0}, 1);
  const auto b = write("b.bin", {5, 1}, 100);
  const ImageDataset ds = read_cifar10_files({a, b}, "test-set");
  EXPECT_EQ(ds.name, "test-set");
  EXPECT_EQ(ds.images.shape(), (Shape{5, 3, 32, 32}));
  EXPECT_EQ(ds.labels.to_vector<int64_t>(), (std::vector<int64_t>{3, 9, 0, 5, 1}));
  EXPECT_EQ(ds.num_classes, 10);
  ASSERT_EQ(ds.mean.size(), 3u);
  const uint8_t* p = ds.images.data<uint8_t>();
  // Record 1 of a.bin: first pixel 1 + 7 = 8, the G plane starts 1024 bytes in.
  EXPECT_EQ(p[3072 + 0], 8);
  EXPECT_EQ(p[3072 + 1024], (8 + 1024) & 255);
  // Record 1 of b.bin (row 4): 100 + 7 + 3071.
  EXPECT_EQ(p[4 * 3072 + 3071], (107 + 3071) & 255);
}

TEST_F(CifarTest, StandardLayoutAndNestedFolder) {
  for (int i = 1; i <= 5; ++i)
    write("cifar-10-batches-bin/data_batch_" + std::to_string(i) + ".bin", {static_cast<uint8_t>(i)}, i);
  write("cifar-10-batches-bin/test_batch.bin", {7, 8}, 0);
  const ImageDataset train = load_cifar10(root_.string(), "train");
  EXPECT_EQ(train.name, "cifar10/train");
  EXPECT_EQ(train.labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  const ImageDataset test = load_cifar10((root_ / "cifar-10-batches-bin").string(), "test");
  EXPECT_EQ(test.size(), 2);
  EXPECT_THROW(load_cifar10(root_.string(), "val"), ValueError);
}

TEST_F(CifarTest, ValidationErrorsNameTheFile) {
  const auto expect_io = [](const std::vector<std::string>& paths, const std::string& needle) {
    try {
      read_cifar10_files(paths, "x");
      ADD_FAILURE() << "expected an IOError containing " << needle;
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_io({write("short.bin", {1, 2}, 0, 5)}, "short.bin");  // 2 records + 5 bytes
  expect_io({write("short2.bin", {1, 2}, 0, 5)}, "3073");
  expect_io({write("empty.bin", {}, 0)}, "empty.bin");
  expect_io({write("label.bin", {1, 10, 2}, 0)}, "label 10");
  expect_io({(root_ / "missing.bin").string()}, "missing.bin");
  EXPECT_THROW(load_cifar10((root_ / "nowhere").string(), "test"), IOError);
  EXPECT_THROW(read_cifar10_files({}, "x"), ValueError);
}

}  // namespace
}  // namespace liftoff
