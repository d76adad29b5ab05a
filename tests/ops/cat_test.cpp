#include "ops/cat/cat.h"

#include <gtest/gtest.h>

#include "ops/views/views.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

using testing::arange;
using testing::throws_naming;
using testing::values;
using V = std::vector<double>;

TEST(Cat, AlongEveryDim) {
  const Tensor a = arange({2, 2});
  const Tensor b = Tensor::full({2, 1}, -1.0, DType::f64);
  EXPECT_EQ(values(cat({a, b}, 1)), (V{0, 1, -1, 2, 3, -1}));
  EXPECT_EQ(values(cat({a, b}, -1)), (V{0, 1, -1, 2, 3, -1}));
  EXPECT_EQ(values(cat({a, transpose(a, 0, 1)}, 0)), (V{0, 1, 2, 3, 0, 2, 1, 3}));
  EXPECT_EQ(cat({a}, 0).shape(), (Shape{2, 2}));
}

TEST(Cat, ManyNonContiguousInputs) {
  std::vector<Tensor> parts;
  V expected;
  for (int i = 0; i < 40; ++i) {
    const Tensor p = transpose(Tensor::full({1 + i % 3, 2}, i, DType::f64), 0, 1);  // [2, 1 + i % 3]
    parts.push_back(p);
  }
  const Tensor out = cat(parts, 1);
  int64_t width = 0;
  for (int i = 0; i < 40; ++i) width += 1 + i % 3;
  EXPECT_EQ(out.shape(), (Shape{2, width}));
  for (int row = 0; row < 2; ++row) {
    for (int i = 0; i < 40; ++i) {
      for (int k = 0; k < 1 + i % 3; ++k) expected.push_back(i);
    }
  }
  EXPECT_EQ(values(out), expected);
}

TEST(Cat, IntegerDtypesAndPromotion) {
  const Tensor a = testing::i64({1, 2}, {2});
  const Tensor b = testing::i64({3}, {1});
  const Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(cat({arange({2}, DType::i32), b}).dtype(), DType::i64);
  EXPECT_EQ(cat({arange({2}, DType::bf16), arange({2}, DType::f32)}).dtype(), DType::f32);
  EXPECT_EQ(cat({arange({2}, DType::bf16), arange({2}, DType::f16)}).dtype(), DType::f32);
  EXPECT_EQ(cat({arange({2}, DType::f16), b}).dtype(), DType::f16);
  EXPECT_EQ(values(cat({arange({2}, DType::f16), b})), (V{0, 1, 3}));
}

TEST(Cat, SkipsLegacyEmptyAndKeepsEmptyParts) {
  const Tensor a = arange({2, 3});
  EXPECT_EQ(cat({Tensor::zeros({0}, DType::f64), a, Tensor::zeros({0}, DType::f64)}, 1).shape(),
            (Shape{2, 3}));
  EXPECT_EQ(cat({a, Tensor::zeros({2, 0}, DType::f64)}, 1).shape(), (Shape{2, 3}));
}

TEST(Cat, ErrorsNameShapes) {
  const Tensor a = arange({2, 3});
  const Tensor b = arange({3, 3});
  EXPECT_TRUE(throws_naming<ShapeError>([&] { cat({a, b}, 1); }, {"cat", "[2, 3]", "[3, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { cat({a, arange({6})}, 0); }, {"cat", "[2, 3]", "[6]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { cat({a, a}, 2); }, {"cat", "dim 2", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { cat({Tensor::zeros({})}, 0); }, {"cat", "zero-dim"}));
  EXPECT_THROW(cat({}, 0), ValueError);
}

TEST(Cat, GradcheckAndSharedInput) {
  const Tensor a = testing::random_tensor({2, 3}, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor({2, 2}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return cat({in[0], transpose(in[1], 0, 1), in[0]}, 0);
      },
      {a, testing::random_tensor({3, 2}, 3).set_requires_grad(true)}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return cat({in[0], in[1], in[0]}, -1);
      },
      {a, b}));
}

TEST(Stack, NewDim) {
  const Tensor a = arange({2, 3});
  const Tensor b = Tensor::full({2, 3}, -1.0, DType::f64);
  EXPECT_EQ(stack({a, b}).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(stack({a, b}, -1).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values(stack({a, b}, 2)), (V{0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1}));
  EXPECT_EQ(stack({Tensor::full({}, 1.0), Tensor::full({}, 2.0)}).shape(), (Shape{2}));
  EXPECT_TRUE(throws_naming<ShapeError>(
      [&] {
        stack({a, transpose(b, 0, 1)});
      },
      {"stack", "[2, 3]", "[3, 2]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { stack({a, b}, 3); }, {"stack", "[2, 3]"}));
  const Tensor x = testing::random_tensor({2, 3}, 4).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return stack({in[0], transpose(in[1], 0, 1), in[0]}, 1);
      },
      {x, testing::random_tensor({3, 2}, 5).set_requires_grad(true)}));
}

}  // namespace
}  // namespace liftoff
