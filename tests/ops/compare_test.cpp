#include "ops/compare/compare.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/binary/binary.h"
#include "ops/reduce/reduce.h"
#include "ops/where/where.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using Values = std::vector<double>;
using Mask = std::vector<bool>;

Tensor t(const Values& values, const Shape& shape) {
  return Tensor::from_vector<double>(values, shape);
}

TEST(BoolDType, NameSizeParseAndReads) {
  EXPECT_STREQ(dtype_name(DType::b8), "bool");
  EXPECT_EQ(dtype_size(DType::b8), 1u);
  EXPECT_EQ(parse_dtype("bool"), DType::b8);
  EXPECT_FALSE(is_floating(DType::b8));
  const Tensor m = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(m.dtype(), DType::b8);
  EXPECT_EQ(m.to_vector<bool>(), (Mask{true, false, true}));
  EXPECT_EQ(m.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(m.to(DType::f32).to_vector<float>(), (std::vector<float>{1.f, 0.f, 1.f}));
  // Casting to bool: nonzero (NaN too) is true.
  EXPECT_EQ(t({0, -2, std::nan("")}, {3}).to(DType::b8).to_vector<bool>(), (Mask{false, true, true}));
  EXPECT_EQ(Tensor::full({2}, 1.0, DType::b8).to_vector<bool>(), (Mask{true, true}));
  EXPECT_EQ(m.slice(0, 1, 3).contiguous().to_vector<bool>(), (Mask{false, true}));
}

TEST(Compare, AllOpsWithBroadcasting) {
  const Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = t({2, 5, 3}, {3});
  EXPECT_EQ(eq(a, b).dtype(), DType::b8);
  EXPECT_EQ(eq(a, b).shape(), (Shape{2, 3}));
  EXPECT_EQ(eq(a, b).to_vector<bool>(), (Mask{false, false, true, false, true, false}));
  EXPECT_EQ(ne(a, b).to_vector<bool>(), (Mask{true, true, false, true, false, true}));
  EXPECT_EQ(lt(a, b).to_vector<bool>(), (Mask{true, true, false, false, false, false}));
  EXPECT_EQ(le(a, b).to_vector<bool>(), (Mask{true, true, true, false, true, false}));
  EXPECT_EQ(gt(a, b).to_vector<bool>(), (Mask{false, false, false, true, false, true}));
  EXPECT_EQ(ge(a, b).to_vector<bool>(), (Mask{false, false, true, true, true, true}));
  EXPECT_EQ(gt(t({1, 2}, {2, 1}), t({0, 1, 2}, {3})).to_vector<bool>(),
            (Mask{true, false, false, true, true, false}));
}

TEST(Compare, ScalarsNaNAndNonContiguous) {
  const double nan = std::nan("");
  const Tensor a = t({1, nan, 3, 0.5}, {2, 2});
  EXPECT_EQ(gt(a, 0.75).to_vector<bool>(), (Mask{true, false, true, false}));
  EXPECT_EQ(eq(a, a).to_vector<bool>(), (Mask{true, false, true, true}));
  EXPECT_EQ(ne(a, a).to_vector<bool>(), (Mask{false, true, false, false}));
  EXPECT_EQ(le(a.permute({1, 0}), 1.0).to_vector<bool>(), (Mask{true, false, false, true}));
  // A float tensor compares with the scalar rounded to f32, as PyTorch (0.1f == 0.1 there).
  EXPECT_EQ(eq(Tensor::full({1}, 0.1, DType::f32), 0.1).to_vector<bool>(), (Mask{true}));
}

TEST(Compare, IntegerAndMixedDtypes) {
  const Tensor labels = Tensor::from_vector<int64_t>({2, 0, 1}, {3});
  const Tensor logits = t({0.1, 0.2, 0.9, 0.8, 0.1, 0.1, 0.3, 0.2, 0.1}, {3, 3});
  const Tensor correct = eq(argmax(logits, 1), labels);
  EXPECT_EQ(correct.to_vector<bool>(), (Mask{true, true, false}));
  EXPECT_EQ(sum(correct.to(DType::f32)).item(), 2.0);
  // i64 against f32 compares in f32; i32 against i64 in i64; scalars against integers in double.
  EXPECT_EQ(lt(labels, Tensor::from_vector<float>({2.5f, -1.f, 1.f}, {3})).to_vector<bool>(),
            (Mask{true, false, false}));
  EXPECT_EQ(eq(Tensor::from_vector<int32_t>({2, 3, 1}, {3}), labels).to_vector<bool>(),
            (Mask{true, false, true}));
  EXPECT_EQ(lt(labels, 1.5).to_vector<bool>(), (Mask{false, true, true}));
  EXPECT_EQ(eq(Tensor::from_vector<uint8_t>({0, 255}, {2}), 255.0).to_vector<bool>(), (Mask{false, true}));
}

TEST(Compare, LogicalNot) {
  const Tensor m = Tensor::from_vector<bool>({true, false}, {2});
  EXPECT_EQ((~m).to_vector<bool>(), (Mask{false, true}));
  EXPECT_EQ(logical_not(t({0, 2, std::nan("")}, {3})).to_vector<bool>(), (Mask{true, false, false}));
  EXPECT_THROW(~t({1}, {1}), DTypeError);
}

TEST(Compare, Errors) {
  try {
    lt(Tensor::zeros({2, 3}), Tensor::zeros({4, 1, 2}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("lt: shapes [2, 3] and [4, 1, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eq(Tensor(), 1.0), ValueError);
}

TEST(Where, ForwardWithBroadcastingAndScalars) {
  const Tensor cond = Tensor::from_vector<bool>({true, false, true}, {3});
  const Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = t({-1, -2}, {2, 1});
  EXPECT_EQ(where(cond, a, b).shape(), (Shape{2, 3}));
  EXPECT_EQ(where(cond, a, b).to_vector<double>(), (Values{1, -1, 3, 4, -2, 6}));
  EXPECT_EQ(where(cond, a, 0.0).to_vector<double>(), (Values{1, 0, 3, 4, 0, 6}));
  EXPECT_EQ(where(cond, 9.0, b).to_vector<double>(), (Values{9, -1, 9, 9, -2, 9}));
  const Tensor ints = where(cond, Tensor::from_vector<int64_t>({1, 2, 3}, {3}), 7.0);
  EXPECT_EQ(ints.dtype(), DType::i64);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{1, 7, 3}));
  const Tensor mixed = where(cond, Tensor::from_vector<float>({1.f, 2.f, 3.f}, {3}), t({0, 0, 0}, {3}));
  EXPECT_EQ(mixed.dtype(), DType::f64);
}

TEST(Where, Gradcheck) {
  const Tensor cond = Tensor::from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  const Tensor a = testing::random_tensor({3}, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor({2, 1}, 2).set_requires_grad(true);
  EXPECT_TRUE(
      testing::gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(
      testing::gradcheck([&](const std::vector<Tensor>& in) { return where(cond, 1.5, in[0]); }, {b}));
}

TEST(Where, MaskedFill) {
  const Tensor x = t({1, 2, 3, 4}, {2, 2}).set_requires_grad(true);
  const Tensor mask = Tensor::from_vector<bool>({false, true}, {2});
  const Tensor y = masked_fill(x, mask, -1e9);
  EXPECT_EQ(y.to_vector<double>(), (Values{1, -1e9, 3, -1e9}));
  y.backward(Tensor::ones({2, 2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (Values{1, 0, 1, 0}));
  // Attention-style: mask positions where scores are below a threshold.
  const Tensor scores = t({0.5, -2, 3, -4}, {2, 2});
  EXPECT_EQ(masked_fill(scores, lt(scores, 0.0), 0.0).to_vector<double>(), (Values{0.5, 0, 3, 0}));
}

TEST(Where, Errors) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(where(Tensor::zeros({3}), x, x), DTypeError);  // condition must be bool
  EXPECT_THROW(where(Tensor::from_vector<bool>({true}, {1}), x, Tensor::zeros({3}, DType::i64)), DTypeError);
  try {
    where(Tensor::from_vector<bool>({true, false}, {2}), x, x);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("condition [2], a [2, 3] and b [2, 3]"), std::string::npos)
        << e.what();
  }
  // masked_fill's mask must broadcast to x (the result keeps x's shape).
  EXPECT_THROW(masked_fill(Tensor::zeros({3}),
                           Tensor::from_vector<bool>({true, true, false, false, true, true}, {2, 3}), 0.0),
               ShapeError);
}

}  // namespace
}  // namespace liftoff
