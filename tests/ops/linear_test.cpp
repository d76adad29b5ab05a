#include "ops/linear/linear.h"

#include <gtest/gtest.h>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Matmul, Forward) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  // [1 2 3; 4 5 6] @ [7 8; 9 10; 11 12]
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Matmul, NonContiguousOperands) {
  const Tensor at =
      Tensor::from_vector<double>({1, 4, 2, 5, 3, 6}, {3, 2}).permute({1, 0});  // [1 2 3; 4 5 6]
  const Tensor b = Tensor::from_vector<double>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(matmul(at, b).to_vector<double>(), (std::vector<double>{58, 64, 139, 154}));
}

TEST(Matmul, Gradcheck) {
  const Tensor a = testing::random_tensor({3, 4}, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4, 5}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b}));
}

TEST(Linear, ForwardWithAndWithoutBias) {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3, -1, 0, 2}, {2, 3});
  const Tensor w = Tensor::from_vector<double>({1, 0, 1, 2, -1, 0.5}, {2, 3});
  const Tensor b = Tensor::from_vector<double>({0.5, -1}, {2});
  // Row 0: [1+3, 2-2+1.5] = [4, 1.5]; row 1: [-1+2, -2+0+1] = [1, -1].
  EXPECT_EQ(linear(x, w).to_vector<double>(), (std::vector<double>{4, 1.5, 1, -1}));
  EXPECT_EQ(linear(x, w, b).to_vector<double>(), (std::vector<double>{4.5, 0.5, 1.5, -2}));
}

TEST(Linear, Gradcheck) {
  const Tensor x = testing::random_tensor({4, 3}, 3).set_requires_grad(true);
  const Tensor w = testing::random_tensor({5, 3}, 4).set_requires_grad(true);
  const Tensor b = testing::random_tensor({5}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                 {x, w, b}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w}));
}

TEST(Linear, BiasGradIsColumnSum) {
  const Tensor x = Tensor::zeros({3, 2}, DType::f64);
  const Tensor w = Tensor::zeros({2, 2}, DType::f64);
  const Tensor b = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  linear(x, w, b).backward(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{9, 12}));
}

TEST(Linear, ErrorNamesShapes) {
  try {
    linear(Tensor::zeros({8, 20}), Tensor::zeros({10, 30}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("linear: input [8, 20] does not match weight [10, 30] (in_features 30)"),
        std::string::npos)
        << e.what();
  }
}

TEST(Linear, RejectsBadArguments) {
  EXPECT_THROW(linear(Tensor::zeros({}), Tensor::zeros({10, 8})), ShapeError);
  EXPECT_THROW(linear(Tensor::zeros({9}), Tensor::zeros({10, 8})), ShapeError);
  EXPECT_THROW(linear(Tensor::zeros({2, 8}), Tensor::zeros({2, 10, 8})), ShapeError);
  EXPECT_THROW(linear(Tensor::zeros({2, 8}), Tensor::zeros({10, 8}), Tensor::zeros({9})), ShapeError);
  EXPECT_THROW(linear(Tensor::zeros({2, 8}), Tensor::zeros({10, 8}, DType::f64)), DTypeError);
  EXPECT_THROW(linear(Tensor::zeros({2, 8}), Tensor::zeros({10, 8}), Tensor::zeros({10}, DType::f64)),
               DTypeError);
  EXPECT_THROW(linear(Tensor::zeros({2, 8}, DType::i32), Tensor::zeros({10, 8}, DType::i32)), DTypeError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), ShapeError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3, 1}), Tensor::zeros({3, 2})), ShapeError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::f64)), DTypeError);
}

}  // namespace
}  // namespace liftoff
