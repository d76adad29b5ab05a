#include "runtime/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/random.h"

namespace liftoff {
namespace {

TEST(Tensor, FactoriesAndShape) {
  const Tensor t = Tensor::full({2, 3}, 1.5);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_TRUE(t.is_contiguous());
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 1.5f);
  EXPECT_THROW(Tensor::empty({2, -1}), ShapeError);
  EXPECT_THROW(t.size(2), ShapeError);
}

TEST(Tensor, ViewsShareStorage) {
  const Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor row = t.select(0, 1);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{3, 4, 5}));
  const Tensor col = t.slice(1, 1, 3);
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  const Tensor transposed = t.permute({1, 0});
  EXPECT_EQ(transposed.contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  row.fill_(9);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 2, 9, 9, 9}));
  EXPECT_EQ(t.view({3, -1}).shape(), (Shape{3, 2}));
  EXPECT_THROW(t.view({4, -1}), ShapeError);
  EXPECT_THROW(transposed.view({6}), ValueError);
}

TEST(Tensor, CopyConvertsDtype) {
  const Tensor t = Tensor::from_vector<double>({1.25, -2.5, 3.0}, {3});
  EXPECT_EQ(t.to(DType::f32).to_vector<float>(), (std::vector<float>{1.25f, -2.5f, 3.0f}));
  EXPECT_EQ(t.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
  // bf16 and f16 keep these values exactly.
  EXPECT_EQ(t.to(DType::bf16).to_vector<double>(), (std::vector<double>{1.25, -2.5, 3.0}));
  EXPECT_EQ(t.to(DType::f16).to_vector<double>(), (std::vector<double>{1.25, -2.5, 3.0}));
  EXPECT_DOUBLE_EQ(Tensor::full({1}, 0.1, DType::f16).item(), 0.0999755859375);
  EXPECT_THROW(t.copy_(Tensor::zeros({4})), ShapeError);
}

TEST(Tensor, DataChecksDtype) {
  const Tensor t = Tensor::zeros({2});
  EXPECT_NO_THROW(t.data<float>());
  EXPECT_THROW(t.data<double>(), DTypeError);
  EXPECT_THROW(Tensor().shape(), ValueError);
}

TEST(Tensor, CudaWithoutBackendFailsClearly) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has CUDA; the message is for CPU-only builds";
  try {
    Tensor::empty({2}, DType::f32, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
}

TEST(Tensor, DeviceParsing) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_THROW(Device::parse("gpu"), ValueError);
  EXPECT_THROW(Device::parse("cuda:x"), ValueError);
}

TEST(Random, ReproducibleAndDistributed) {
  Generator a(7), b(7);
  EXPECT_EQ(randn({100}, a).to_vector<float>(), randn({100}, b).to_vector<float>());
  Generator c(8);
  EXPECT_NE(randn({100}, a).to_vector<float>(), randn({100}, c).to_vector<float>());
  Generator g(1);
  const std::vector<double> v = randn({20000}, g, 0.0, 1.0, DType::f64).to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) {
    mean += x;
    sq += x * x;
  }
  mean /= v.size();
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(sq / v.size() - mean * mean, 1.0, 0.05);
  const std::vector<int64_t> perm = randperm(1000, g);
  std::vector<bool> seen(1000, false);
  for (int64_t i : perm) seen[static_cast<size_t>(i)] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 1000);
}

}  // namespace
}  // namespace liftoff

namespace liftoff {
namespace {
TEST(Tensor, EmptyTensorsAreContiguous) {
  const Tensor t = Tensor::zeros({2, 0, 3});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().numel(), 0);
  EXPECT_EQ(t.clone().shape(), (Shape{2, 0, 3}));
}
}  // namespace
}  // namespace liftoff
