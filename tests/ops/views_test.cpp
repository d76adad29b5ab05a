#include "ops/views/views.h"

#include <gtest/gtest.h>

#include "ops/add/add.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

using testing::arange;
using testing::throws_naming;
using testing::values;
using V = std::vector<double>;

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.storage().data() == b.storage().data();
}

TEST(Slice, StepAndClampedBounds) {
  const Tensor x = arange({10});
  const Tensor y = slice(x, 0, 1, 8, 3);
  EXPECT_EQ(values(y), (V{1, 4, 7}));
  EXPECT_TRUE(shares_storage(x, y));
  EXPECT_EQ(values(slice(x, 0, -3)), (V{7, 8, 9}));
  EXPECT_EQ(values(slice(x, -1, -100, 100, 4)), (V{0, 4, 8}));
  EXPECT_EQ(slice(x, 0, 8, 2).numel(), 0);
  EXPECT_EQ(slice(x, 0, 12, 20).numel(), 0);
  EXPECT_TRUE(throws_naming<ValueError>([&] { slice(x, 0, 0, 5, 0); }, {"slice", "step", "[10]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { slice(x, 1, 0, 5); }, {"slice", "[10]"}));
}

TEST(Slice, WritesThroughAndStridedBase) {
  const Tensor x = arange({3, 4});
  const Tensor col = slice(transpose(x, 0, 1), 0, 1, kSliceEnd, 2);  // columns 1 and 3 as rows
  EXPECT_EQ(col.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(col), (V{1, 5, 9, 3, 7, 11}));
  col.fill_(-1);
  EXPECT_EQ(values(x), (V{0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}));
}

TEST(Slice, Gradcheck) {
  const Tensor x = testing::random_tensor({4, 7}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return slice(transpose(in[0], 0, 1), 0, -6, 7, 2); }, {x}));
}

TEST(Slice, SameBaseViewedTwiceAccumulates) {
  const Tensor x = Tensor::zeros({5}, DType::f64).set_requires_grad(true);
  add(slice(x, 0, 0, 3), slice(x, 0, 2, 5)).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(values(x.grad()), (V{1, 1, 2, 1, 1}));
  const Tensor w = testing::random_tensor({6}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return add(slice(in[0], 0, 0, 6, 2), slice(in[0], 0, 1, 6, 2)); },
      {w}));
}

TEST(Select, NegativeIndexAndErrors) {
  const Tensor x = arange({2, 3});
  const Tensor y = select(x, 1, -1);
  EXPECT_EQ(values(y), (V{2, 5}));
  EXPECT_TRUE(shares_storage(x, y));
  EXPECT_EQ(values(select(x, -2, -2)), (V{0, 1, 2}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { select(x, 1, 3); }, {"select", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { select(x, 1, -4); }, {"select", "[2, 3]"}));
  const Tensor w = testing::random_tensor({3, 4}, 3).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return add(select(in[0], 1, -1), select(in[0], 1, 0)); }, {w}));
}

TEST(Narrow, RangeChecked) {
  const Tensor x = arange({6});
  EXPECT_EQ(values(narrow(x, 0, -4, 2)), (V{2, 3}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { narrow(x, 0, 4, 3); }, {"narrow", "[6]"}));
}

TEST(Transpose, MovedimPermute) {
  const Tensor x = arange({2, 3, 4});
  const Tensor t = transpose(x, 0, -1);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_TRUE(shares_storage(x, t));
  EXPECT_EQ(values(t.contiguous()).front(), 0);
  EXPECT_EQ(values(t.contiguous())[1], 12);
  EXPECT_EQ(movedim(x, 0, -1).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(movedim(x, -1, 0).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(movedim(x, {0, 1}, {2, 0}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(values(movedim(x, 0, -1).contiguous()), values(permute(x, {1, 2, 0}).contiguous()));
  EXPECT_EQ(transpose(Tensor::full({}, 3.0), 0, -1).shape(), Shape{});
  EXPECT_TRUE(throws_naming<ShapeError>([&] { transpose(x, 0, 3); }, {"transpose", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { movedim(x, {0, 0}, {1, 2}); }, {"movedim", "[2, 3, 4]"}));
  const Tensor w = testing::random_tensor({2, 3, 4}, 4).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return movedim(transpose(in[0], 1, 2), {0, 2}, {1, 0});
      },
      {w}));
}

TEST(Squeeze, Unsqueeze) {
  const Tensor x = arange({1, 3, 1, 2});
  EXPECT_EQ(squeeze(x).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(x, 1).shape(), (Shape{1, 3, 1, 2}));  // size 3: left alone, as PyTorch
  EXPECT_EQ(squeeze(x, -2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze(x, std::vector<int64_t>{0, 2}).shape(), (Shape{3, 2}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), (Shape{1, 3, 1, 2, 1}));
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_EQ(unsqueeze(Tensor::full({}, 1.0), 0).shape(), (Shape{1}));
  EXPECT_TRUE(shares_storage(x, squeeze(x)));
  EXPECT_EQ(values(unsqueeze(transpose(arange({2, 3}), 0, 1), 1).contiguous()), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { unsqueeze(x, 5); }, {"unsqueeze", "[1, 3, 1, 2]"}));
  const Tensor w = testing::random_tensor({3, 1, 2}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return unsqueeze(squeeze(transpose(in[0], 0, 2)), 1); }, {w}));
}

TEST(Flatten, ViewWhenPossibleElseCopy) {
  const Tensor x = arange({2, 3, 4});
  const Tensor f = flatten(x, 1, 2);
  EXPECT_EQ(f.shape(), (Shape{2, 12}));
  EXPECT_TRUE(shares_storage(x, f));
  EXPECT_EQ(flatten(x, 0, -1).shape(), (Shape{24}));
  EXPECT_EQ(flatten(x, 0, 1).shape(), (Shape{6, 4}));
  // Dims 0..1 of a transposed tensor are still one strided run: a view.
  const Tensor t = transpose(x, 1, 2);  // [2, 4, 3]
  EXPECT_TRUE(shares_storage(x, flatten(t, 0, 0)));
  const Tensor c = flatten(t, 1, 2);  // not viewable: a copy in logical order
  EXPECT_FALSE(shares_storage(x, c));
  EXPECT_EQ(values(c).at(1), 4);
  const Tensor s = flatten(slice(x, 2, 0, 4, 2), 0, 1);  // strided innermost dim but rows still regular
  EXPECT_TRUE(shares_storage(x, s));
  EXPECT_EQ(values(s.contiguous()), values(slice(x, 2, 0, 4, 2).contiguous()));
  EXPECT_EQ(flatten(Tensor::full({}, 1.0), 0, -1).shape(), (Shape{1}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { flatten(x, 2, 1); }, {"flatten", "[2, 3, 4]"}));
  const Tensor w = testing::random_tensor({2, 3, 4}, 6).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return flatten(transpose(in[0], 1, 2), 1, 2); }, {w}));
}

TEST(Unflatten, SplitsADim) {
  const Tensor x = arange({2, 12});
  const Tensor u = unflatten(x, 1, {3, -1});
  EXPECT_EQ(u.shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(shares_storage(x, u));
  EXPECT_EQ(values(select(select(u, 0, 1), 0, 2)), (V{20, 21, 22, 23}));
  const Tensor ut = unflatten(transpose(x, 0, 1), 0, {4, 3});  // strided dim
  EXPECT_EQ(values(ut.contiguous()), values(transpose(x, 0, 1).contiguous()));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { unflatten(x, 1, {5, -1}); }, {"unflatten", "[2, 12]"}));
  const Tensor w = testing::random_tensor({2, 6}, 7).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return unflatten(in[0], -1, {2, 3});
      },
      {w}));
}

TEST(Expand, StrideZeroView) {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3, 1});
  const Tensor e = expand(x, {2, -1, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_TRUE(shares_storage(x, e));
  EXPECT_EQ(values(select(e, 0, 1)), (V{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  EXPECT_EQ(broadcast_to(x, {3, 2}).shape(), (Shape{3, 2}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { expand(x, {2, 2}); }, {"expand", "[3, 1]", "[2, 2]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { expand(x, {4}); }, {"expand", "[3, 1]", "[4]"}));
}

TEST(Expand, BackwardSums) {
  const Tensor x = Tensor::zeros({3, 1}, DType::f64).set_requires_grad(true);
  expand(x, {2, 3, 4}).backward(arange({2, 3, 4}));
  // x[i] collects the gradient of every (n, i, j).
  EXPECT_EQ(values(x.grad()), (V{0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 4 + 5 + 6 + 7 + 16 + 17 + 18 + 19,
                                 8 + 9 + 10 + 11 + 20 + 21 + 22 + 23}));
  const Tensor w = testing::random_tensor({3, 1}, 8).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return expand(in[0], {2, 3, 5});
      },
      {w}));
}

TEST(SumToSize, ValuesAndErrors) {
  const Tensor x = arange({2, 3});
  EXPECT_EQ(values(sum_to_size(x, {1, 3})), (V{3, 5, 7}));
  EXPECT_EQ(values(sum_to_size(x, {3})), (V{3, 5, 7}));
  EXPECT_EQ(values(sum_to_size(x, {2, 1})), (V{3, 12}));
  EXPECT_EQ(values(sum_to_size(x, {})), (V{15}));
  EXPECT_EQ(values(sum_to_size(transpose(x, 0, 1), {3, 1})), (V{3, 5, 7}));
  EXPECT_TRUE(sum_to_size(x, {2, 3}).same(x));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { sum_to_size(x, {2}); }, {"sum_to_size", "[2, 3]", "[2]"}));
  EXPECT_THROW(sum_to_size(arange({2}, DType::i64), {1}), DTypeError);
  const Tensor w = testing::random_tensor({2, 3, 4}, 9).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return sum_to_size(in[0], {3, 1});
      },
      {w}));
}

}  // namespace
}  // namespace liftoff
