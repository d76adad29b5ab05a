// runtime/cuda/grad_cast.cu: half gradients into f32 destinations in one launch, bit for bit what
// Tensor::copy_ (and accumulate_into, for an existing gradient) give: channels-last conv gradients into
// contiguous masters (the transpose), linear copies, f16 and bf16 together, and more tensors than one
// launch's table holds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/grad_cast.h"
#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

Tensor random_cuda(const Shape& shape, uint32_t seed, DType dtype, MemoryFormat format) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = normal(gen);
  const Tensor host = Tensor::from_vector(v, shape, Device::cuda());
  Tensor out = Tensor::empty(shape, dtype, Device::cuda(), format);
  out.copy_(host);
  return out;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> va = a.contiguous().to_vector<float>(), vb = b.contiguous().to_vector<float>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << what;
}

struct Case {
  Shape shape;
  DType src_dtype;
  MemoryFormat src_format, dst_format;
  bool accumulate;
};

TEST(GradCastCuda, OneLaunchEqualsCopyAndAccumulate) {
  LIFTOFF_REQUIRE_CUDA();
  constexpr MemoryFormat kCl = MemoryFormat::channels_last, kDense = MemoryFormat::contiguous;
  const std::vector<Case> cases = {
      {{64, 48, 3, 3}, DType::bf16, kCl, kDense, false},  // a 3x3 conv's KRSC gradient into KCRS
      {{5, 130, 3, 3}, DType::f16, kCl, kDense, true},    // ... added into an existing gradient
      {{32, 16, 1, 1}, DType::bf16, kCl, kDense, false},  // 1x1: the same bytes in both layouts
      {{64, 1, 3, 3}, DType::bf16, kCl, kDense, true},    // depthwise: C == 1
      {{10, 300}, DType::bf16, kDense, kDense, true},     // a linear weight
      {{7}, DType::f16, kDense, kDense, false},           // a bias
      {{8, 24, 5, 5}, DType::bf16, kCl, kCl, true},       // a channels-last master
      {{3, 2, 40, 30}, DType::f16, kCl, kDense, false},   // more than one block a tensor
  };
  std::vector<Tensor> srcs, dsts, expected;
  std::vector<bool> accumulate;
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const Tensor src = random_cuda(c.shape, seed++, c.src_dtype, c.src_format);
    const Tensor dst = random_cuda(c.shape, seed++, DType::f32, c.dst_format);
    ASSERT_TRUE(cuda::leaf_grad_cast_supported(src, dst)) << shape_str(c.shape);
    Tensor want = Tensor::empty(c.shape, DType::f32, Device::cuda(), c.dst_format);
    if (c.accumulate) {
      want.copy_(dst);
      accumulate_into(want, src.to(DType::f32));
    } else {
      want.copy_(src);
    }
    srcs.push_back(src);
    dsts.push_back(dst);
    expected.push_back(want);
    accumulate.push_back(c.accumulate);
  }
  cuda::cast_leaf_grads(srcs, dsts, accumulate);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(dsts[i].strides(), expected[i].strides()) << shape_str(cases[i].shape);
    expect_same_bits(dsts[i], expected[i], shape_str(cases[i].shape));
  }
}

TEST(GradCastCuda, MoreTensorsThanOneLaunchHolds) {
  LIFTOFF_REQUIRE_CUDA();
  std::vector<Tensor> srcs, dsts, expected;
  std::vector<bool> accumulate;
  for (uint32_t i = 0; i < 230; ++i) {
    const Shape shape{static_cast<int64_t>(4 + i % 5), static_cast<int64_t>(3 + i % 7), 3, 3};
    srcs.push_back(random_cuda(shape, 1000 + i, DType::bf16, MemoryFormat::channels_last));
    dsts.push_back(random_cuda(shape, 5000 + i, DType::f32, MemoryFormat::contiguous));
    Tensor want = dsts.back().clone();
    accumulate_into(want, srcs.back().to(DType::f32));
    expected.push_back(want);
    accumulate.push_back(true);
  }
  cuda::cast_leaf_grads(srcs, dsts, accumulate);
  for (size_t i = 0; i < srcs.size(); ++i)
    expect_same_bits(dsts[i], expected[i], "tensor " + std::to_string(i));
}

TEST(GradCastCuda, RefusesWhatItCannotConvert) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor half = random_cuda({4, 3, 3, 3}, 1, DType::bf16, MemoryFormat::contiguous);
  const Tensor master_cl = random_cuda({4, 3, 3, 3}, 2, DType::f32, MemoryFormat::channels_last);
  EXPECT_FALSE(cuda::leaf_grad_cast_supported(half, master_cl));  // contiguous into channels-last
  EXPECT_FALSE(cuda::leaf_grad_cast_supported(half.to(DType::f32), half.to(DType::f32)));  // not half
  EXPECT_FALSE(
      cuda::leaf_grad_cast_supported(half, random_cuda({4, 3, 9}, 3, DType::f32, MemoryFormat::contiguous)));
  EXPECT_FALSE(cuda::leaf_grad_cast_supported(half, half.to(Device::cpu(), DType::f32)));
}

#else
TEST(GradCastCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
