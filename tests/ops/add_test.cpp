#include "ops/add/add.h"

#include <gtest/gtest.h>

#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Add, Forward) {
  const Tensor a = Tensor::from_vector<float>({1.f, -2.f, 3.5f, 0.f}, {2, 2});
  const Tensor b = Tensor::from_vector<float>({0.5f, 2.f, -1.f, 4.f}, {2, 2});
  const Tensor y = a + b;
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1.5f, 0.f, 2.5f, 4.f}));
}

TEST(Add, Alpha) {
  const Tensor a = Tensor::from_vector<double>({1, 2}, {2});
  const Tensor b = Tensor::from_vector<double>({10, 20}, {2});
  EXPECT_EQ(add(a, b, 0.5).to_vector<double>(), (std::vector<double>{6, 12}));
  EXPECT_EQ(add(a, 3.0, 2.0).to_vector<double>(), (std::vector<double>{7, 8}));
}

TEST(Add, NonContiguousOperand) {
  const Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<double>({10, 20, 30, 40, 50, 60}, {3, 2}).permute({1, 0});
  EXPECT_EQ(add(a, b).to_vector<double>(), (std::vector<double>{11, 32, 53, 24, 45, 66}));
}

TEST(Add, Gradcheck) {
  const Tensor a = testing::random_tensor({3, 4}, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3, 4}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(
      testing::gradcheck([](const std::vector<Tensor>& in) { return add(in[0], in[1], -2.5); }, {a, b}));
}

TEST(Add, SameTensorTwiceAccumulates) {
  const Tensor a = testing::random_tensor({5}, 3).set_requires_grad(true);
  add(a, a).backward(Tensor::ones({5}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>(5, 2.0)));
}

TEST(Add, PromotesMixedFloatingDtypes) {
  const Tensor a = Tensor::from_vector<float>({1.5f, 2.f}, {2}).set_requires_grad(true);
  const Tensor b = Tensor::from_vector<double>({0.25, 1.0}, {2}).set_requires_grad(true);
  const Tensor y = add(a, b);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1.75, 3.0}));
  y.backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(a.grad().dtype(), DType::f32);  // the gradient comes back in each operand's own dtype
  EXPECT_EQ(b.grad().dtype(), DType::f64);
}

TEST(Add, RejectsMismatches) {
  EXPECT_THROW(add(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), ShapeError);
  EXPECT_THROW(add(Tensor::zeros({2}, DType::i64), Tensor::zeros({2}, DType::i64)), DTypeError);
  EXPECT_THROW(add(Tensor::zeros({2}), Tensor()), ValueError);
}

TEST(Add, ShapeErrorNamesBothShapes) {
  try {
    add(Tensor::zeros({2, 3}), Tensor::zeros({4}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("add: shapes [2, 3] and [4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace liftoff
