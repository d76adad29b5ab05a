#include "data/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace liftoff {
namespace {

bool have_fashion_mnist() {
  std::error_code ec;
  return std::filesystem::exists(std::string(kFashionMnistDefaultDir) + "/train-images-idx3-ubyte.gz", ec);
}

TEST(FashionMnist, TrainSplit) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << kFashionMnistDefaultDir << " not found (apt-get install dataset-fashion-mnist)";
  }
  const ImageDataset ds = load_fashion_mnist();
  EXPECT_EQ(ds.name, "fashion-mnist/train");
  EXPECT_EQ(ds.images.shape(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(ds.images.dtype(), DType::u8);
  EXPECT_EQ(ds.labels.shape(), (Shape{60000}));
  EXPECT_EQ(ds.labels.dtype(), DType::i64);
  EXPECT_EQ(ds.num_classes, 10);
  std::vector<int64_t> per_class(10, 0);
  for (int64_t label : ds.labels.to_vector<int64_t>()) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[static_cast<size_t>(label)];
  }
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 6000));
  EXPECT_FLOAT_EQ(ds.mean[0], 0.2860f);
  EXPECT_FLOAT_EQ(ds.stddev[0], 0.3530f);
  // The published statistics match the pixels.
  double sum = 0.0;
  const uint8_t* p = ds.images.data<uint8_t>();
  for (int64_t i = 0; i < ds.images.numel(); ++i) sum += p[i];
  EXPECT_NEAR(sum / static_cast<double>(ds.images.numel()) / 255.0, 0.2860, 5e-4);
}

TEST(FashionMnist, TestSplit) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << kFashionMnistDefaultDir << " not found (apt-get install dataset-fashion-mnist)";
  }
  const ImageDataset ds = load_fashion_mnist(kFashionMnistDefaultDir, "test");
  EXPECT_EQ(ds.images.shape(), (Shape{10000, 1, 28, 28}));
  EXPECT_EQ(ds.labels.shape(), (Shape{10000}));
  std::vector<int64_t> per_class(10, 0);
  for (int64_t label : ds.labels.to_vector<int64_t>()) ++per_class[static_cast<size_t>(label)];
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 1000));
}

TEST(Synthetic, ShapesStatisticsAndDeterminism) {
  const ImageDataset a = make_synthetic_dataset(50, 3, 8, 6, 4, 7);
  EXPECT_EQ(a.name, "synthetic");
  EXPECT_EQ(a.images.shape(), (Shape{50, 3, 8, 6}));
  EXPECT_EQ(a.labels.shape(), (Shape{50}));
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_EQ(a.mean, std::vector<float>(3, 0.5f));
  EXPECT_EQ(a.stddev, std::vector<float>(3, 0.25f));
  std::vector<int64_t> per_class(4, 0);
  for (int64_t label : a.labels.to_vector<int64_t>()) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 4);
    ++per_class[static_cast<size_t>(label)];
  }
  for (int64_t count : per_class) EXPECT_GT(count, 0);

  const ImageDataset same = make_synthetic_dataset(50, 3, 8, 6, 4, 7);
  EXPECT_EQ(a.images.to_vector<uint8_t>(), same.images.to_vector<uint8_t>());
  EXPECT_EQ(a.labels.to_vector<int64_t>(), same.labels.to_vector<int64_t>());
  const ImageDataset other = make_synthetic_dataset(50, 3, 8, 6, 4, 8);
  EXPECT_NE(a.images.to_vector<uint8_t>(), other.images.to_vector<uint8_t>());
  EXPECT_NE(a.labels.to_vector<int64_t>(), other.labels.to_vector<int64_t>());
}

TEST(Synthetic, SameClassImagesAreCloserThanOtherClass) {
  // The class template makes the set learnable: two images of one class differ less than images of two
  // classes.
  const ImageDataset ds = make_synthetic_dataset(200, 1, 16, 16, 2, 3);
  const auto labels = ds.labels.to_vector<int64_t>();
  const uint8_t* p = ds.images.data<uint8_t>();
  auto distance = [&](int64_t i, int64_t j) {
    double d = 0.0;
    for (int64_t k = 0; k < 256; ++k) d += std::abs(int(p[i * 256 + k]) - int(p[j * 256 + k]));
    return d;
  };
  double same = 0.0, diff = 0.0;
  int64_t n_same = 0, n_diff = 0;
  for (int64_t i = 0; i < 40; ++i) {
    for (int64_t j = i + 1; j < 40; ++j) {
      (labels[i] == labels[j] ? same : diff) += distance(i, j);
      ++(labels[i] == labels[j] ? n_same : n_diff);
    }
  }
  ASSERT_GT(n_same, 0);
  ASSERT_GT(n_diff, 0);
  EXPECT_LT(same / n_same, 0.6 * diff / n_diff);
}

TEST(Synthetic, RejectsBadArguments) {
  EXPECT_THROW(make_synthetic_dataset(0, 1, 8, 8, 10, 0), ValueError);
  EXPECT_THROW(make_synthetic_dataset(10, 1, 8, 8, 0, 0), ValueError);
  EXPECT_THROW(make_synthetic_dataset(10, 1, 5000, 8, 10, 0), ValueError);
  EXPECT_THROW(make_synthetic_dataset(100000000, 64, 4096, 4096, 10, 0), ValueError);
}

}  // namespace
}  // namespace liftoff
