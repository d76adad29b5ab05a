#include "ops/split/split.h"

#include <gtest/gtest.h>

#include "ops/binary/binary.h"
#include "ops/cat/cat.h"
#include "ops/reduce/reduce.h"
#include "ops/views/views.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

using testing::arange;
using testing::throws_naming;
using testing::values;
using V = std::vector<double>;

Shape sizes_along(const std::vector<Tensor>& pieces, int64_t dim) {
  Shape s;
  for (const Tensor& p : pieces) s.push_back(p.size(dim));
  return s;
}

TEST(Split, BySizeAndBySizes) {
  const Tensor x = arange({7, 2});
  const auto pieces = split(x, 3);
  EXPECT_EQ(sizes_along(pieces, 0), (Shape{3, 3, 1}));
  EXPECT_EQ(values(pieces[2]), (V{12, 13}));
  for (const Tensor& p : pieces) EXPECT_EQ(p.storage().data(), x.storage().data());
  EXPECT_EQ(sizes_along(split(x, std::vector<int64_t>{2, 0, 5}, 0), 0), (Shape{2, 0, 5}));
  EXPECT_EQ(values(split(x, 1, -1)[1]), (V{1, 3, 5, 7, 9, 11, 13}));
  EXPECT_EQ(split(x, 10).size(), 1u);
  EXPECT_TRUE(throws_naming<ShapeError>([&] { split(x, std::vector<int64_t>{2, 2}); }, {"split", "[7, 2]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { split(x, 0); }, {"split", "[7, 2]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { split(x, 2, 2); }, {"split", "[7, 2]"}));
}

TEST(Chunk, PyTorchSizes) {
  const Tensor x = arange({6});
  EXPECT_EQ(sizes_along(chunk(x, 4), 0), (Shape{2, 2, 2}));  // ceil(6 / 4) = 2: three pieces, as PyTorch
  EXPECT_EQ(sizes_along(chunk(arange({5}), 2), 0), (Shape{3, 2}));
  EXPECT_EQ(chunk(Tensor::zeros({0}), 3).size(), 3u);
  EXPECT_TRUE(throws_naming<ShapeError>([&] { chunk(x, 0); }, {"chunk", "[6]"}));
}

TEST(Unbind, RemovesDim) {
  const Tensor x = arange({2, 3});
  const auto cols = unbind(x, 1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(values(cols[2]), (V{2, 5}));
  EXPECT_EQ(cols[0].shape(), (Shape{2}));
}

// One node for all pieces: its backward joins their gradients (zeros for a piece that got none, such as an
// unused one); a piece may be the root of the backward.
TEST(Split, OneNodeJoinsThePiecesGradients) {
  const Tensor x = arange({6, 2}).set_requires_grad(true);
  const auto pieces = split(x, 2);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].grad_fn(), pieces[2].grad_fn());
  EXPECT_EQ(pieces[0].grad_fn()->name(), "split");
  sum(mul(pieces[2], pieces[2])).backward();  // pieces 0 and 1 unused
  EXPECT_EQ(values(x.grad()), (V{0, 0, 0, 0, 0, 0, 0, 0, 16, 18, 20, 22}));
  const Tensor y = arange({2, 3}).set_requires_grad(true);
  const auto cols = unbind(y, 1);
  EXPECT_EQ(cols[1].grad_fn()->name(), "unbind");
  cols[1].backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(values(y.grad()), (V{0, 1, 0, 0, 1, 0}));
}

TEST(Split, PiecesBackwardIntoOneBase) {
  // Two pieces of one base, used together: both gradients must land in the base.
  const Tensor x = testing::random_tensor({5, 3}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        const auto p = split(in[0], std::vector<int64_t>{2, 3}, 0);
        const auto c = chunk(in[0], 3, 1);
        return cat({cat({p[1], p[0]}, 0), c[2]}, 1);
      },
      {x}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        const auto r = unbind(in[0], 1);
        return stack({r[2], r[0], r[2]}, 0);
      },
      {x}));
}

}  // namespace
}  // namespace liftoff
