#include "ops/index/index.h"

#include <gtest/gtest.h>

#include "ops/views/views.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

using testing::arange;
using testing::i64;
using testing::throws_naming;
using testing::values;
using V = std::vector<double>;

TEST(IndexSelect, Values) {
  const Tensor x = arange({3, 4});
  EXPECT_EQ(values(index_select(x, 0, i64({2, 0, 2}, {3}))), (V{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(values(index_select(x, -1, i64({3, 1}, {2}))), (V{3, 1, 7, 5, 11, 9}));
  EXPECT_EQ(index_select(x, 1, i64({}, {0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(index_select(x, 0, i64({1}, {})).shape(), (Shape{1, 4}));
  EXPECT_EQ(values(index_select(x, 1, arange({2}, DType::i32))), (V{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(values(index_select(transpose(x, 0, 1), 0, slice(i64({0, 9, 3}, {3}), 0, 0, 3, 2))),
            (V{0, 4, 8, 3, 7, 11}));
  EXPECT_EQ(index_select(arange({3}, DType::i64), 0, i64({2, 2}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(index_select(Tensor::full({}, 5.0, DType::f64), 0, i64({0}, {1}))), (V{5}));
}

TEST(IndexSelect, ErrorsNameShapesAndValues) {
  const Tensor x = arange({3, 4});
  EXPECT_TRUE(throws_naming<ValueError>(
      [&] {
        index_select(x, 0, i64({0, 3}, {2}));
      },
      {"index_select", "index 3", "[3, 4]"}));
  EXPECT_TRUE(throws_naming<ValueError>([&] { index_select(x, 0, i64({-1}, {1})); }, {"index_select", "-1"}));
  EXPECT_TRUE(throws_naming<ShapeError>(
      [&] {
        index_select(x, 0, i64({0, 1}, {1, 2}));
      },
      {"index_select", "[1, 2]", "[3, 4]"}));
  EXPECT_TRUE(
      throws_naming<ShapeError>([&] { index_select(x, 2, i64({0}, {1})); }, {"index_select", "[3, 4]"}));
  EXPECT_THROW(index_select(x, 0, arange({2})), DTypeError);
}

TEST(IndexSelect, BackwardAccumulatesRepeats) {
  const Tensor x = Tensor::zeros({3, 2}, DType::f64).set_requires_grad(true);
  index_select(x, 0, i64({2, 0, 2}, {3})).backward(arange({3, 2}));
  EXPECT_EQ(values(x.grad()), (V{2, 3, 0, 0, 0 + 4, 1 + 5}));
  const Tensor w = testing::random_tensor({4, 3}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return index_select(transpose(in[0], 0, 1), 1, i64({3, 0, 3, 1}, {4}));
      },
      {w}));
}

TEST(Gather, Values) {
  const Tensor x = arange({2, 3});
  // torch.gather(x, 1, [[2, 0], [1, 1]]) = [[2, 0], [4, 4]]
  EXPECT_EQ(values(gather(x, 1, i64({2, 0, 1, 1}, {2, 2}))), (V{2, 0, 4, 4}));
  // dim 0 with a smaller index: [[1, 0, 1]] -> [[3, 1, 5]]
  EXPECT_EQ(values(gather(x, 0, i64({1, 0, 1}, {1, 3}))), (V{3, 1, 5}));
  EXPECT_EQ(values(gather(transpose(x, 0, 1), -1, i64({1, 0, 0}, {3, 1}))), (V{3, 1, 2}));
  EXPECT_EQ(gather(Tensor::full({}, 2.0, DType::f64), 0, i64({0}, {})).shape(), Shape{});
  EXPECT_TRUE(throws_naming<ShapeError>(
      [&] {
        gather(x, 1, i64({0, 0, 0, 0, 0, 0}, {3, 2}));
      },
      {"gather", "[3, 2]", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { gather(x, 1, i64({0}, {1})); }, {"gather", "[1]", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ValueError>(
      [&] {
        gather(x, 1, i64({3}, {1, 1}));
      },
      {"gather", "index 3", "[2, 3]"}));
}

TEST(Gather, Gradcheck) {
  const Tensor w = testing::random_tensor({3, 4}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return gather(in[0], 1, i64({3, 3, 0, 1, 1, 1, 2, 0, 3}, {3, 3}));
      },
      {w}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return gather(transpose(in[0], 0, 1), 0, i64({1, 0, 2, 2, 2, 0}, {2, 3}));
      },
      {w}));
}

TEST(ScatterAdd, Values) {
  const Tensor x = Tensor::ones({2, 4}, DType::f64);
  const Tensor src = arange({2, 3});
  // out[i][index[i][j]] += src[i][j]
  const Tensor out = scatter_add(x, 1, i64({0, 0, 3, 2, 1, 2}, {2, 3}), src);
  EXPECT_EQ(values(out), (V{1 + 0 + 1, 1, 1, 1 + 2, 1, 1 + 4, 1 + 3 + 5, 1}));
  EXPECT_EQ(values(x), V(8, 1));  // out of place
  // A smaller index uses only the matching corner of src.
  EXPECT_EQ(values(scatter_add(Tensor::zeros({3}, DType::f64), 0, i64({2, 2}, {2}), arange({4}))),
            (V{0, 0, 1}));
  const Tensor ints =
      scatter_add(Tensor::zeros({3}, DType::i64), 0, i64({1, 1, 0}, {3}), i64({5, 6, 7}, {3}));
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{7, 11, 0}));
  EXPECT_TRUE(throws_naming<ShapeError>(
      [&] {
        scatter_add(x, 1, i64({0, 0, 0}, {1, 3}), arange({1, 2}));
      },
      {"scatter_add", "[1, 3]", "[1, 2]", "[2, 4]"}));
  EXPECT_TRUE(throws_naming<DTypeError>(
      [&] {
        scatter_add(x, 1, i64({0}, {1, 1}), arange({1, 1}, DType::f32));
      },
      {"scatter_add", "f32"}));
  EXPECT_TRUE(throws_naming<ValueError>(
      [&] {
        scatter_add(x, 1, i64({4}, {1, 1}), src);
      },
      {"scatter_add", "index 4", "[2, 4]"}));
}

TEST(ScatterAdd, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 4}, 3).set_requires_grad(true);
  const Tensor src = testing::random_tensor({2, 5}, 4).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return scatter_add(in[0], 1, i64({3, 0, 3, 1, 1, 1}, {2, 3}), in[1]);
      },
      {x, src}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return scatter_add(transpose(in[0], 0, 1), 0, i64({2, 2, 0, 1}, {2, 2}), transpose(in[1], 0, 1));
      },
      {x, src}));
}

}  // namespace
}  // namespace liftoff
