#include "ops/embedding/embedding.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// weight[r][d] = 10 r + d.
Tensor table(int64_t num, int64_t dim, DType dtype = DType::f64) {
  std::vector<double> v;
  for (int64_t r = 0; r < num; ++r)
    for (int64_t d = 0; d < dim; ++d) v.push_back(10.0 * static_cast<double>(r) + static_cast<double>(d));
  return Tensor::from_vector<double>(v, {num, dim}).to(dtype);
}

TEST(Embedding, LooksUpRowsForAnyIndexShape) {
  const Tensor w = table(4, 3);
  const Tensor y = embedding(Tensor::from_vector<int64_t>({1, 3, 0, 1}, {2, 2}), w);
  EXPECT_EQ(y.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{10, 11, 12, 30, 31, 32, 0, 1, 2, 10, 11, 12}));
  const Tensor y32 = embedding(Tensor::from_vector<int32_t>({2}, {}), table(4, 3, DType::f32));
  EXPECT_EQ(y32.shape(), Shape({3}));
  EXPECT_EQ(y32.dtype(), DType::f32);
  EXPECT_EQ(y32.to_vector<double>(), (std::vector<double>{20, 21, 22}));
}

TEST(Embedding, BackwardSumsRepeatsAndSkipsPadding) {
  const Tensor w = table(4, 2).set_requires_grad(true);
  const Tensor idx = Tensor::from_vector<int64_t>({1, 3, 1, 0, 3}, {5});
  const Tensor gy = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2});
  embedding(idx, w).backward(gy);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{7, 8, 6, 8, 0, 0, 12, 14}));
  w.set_grad(Tensor());
  embedding(idx, w, 3).backward(gy);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{7, 8, 6, 8, 0, 0, 0, 0}));
  w.set_grad(Tensor());
  embedding(idx, w, -3).backward(gy);  // -3 is row 1
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{7, 8, 0, 0, 0, 0, 12, 14}));
}

TEST(Embedding, Gradcheck) {
  const Tensor w = testing::random_tensor({5, 3}, 1).set_requires_grad(true);
  const Tensor idx = Tensor::from_vector<int32_t>({4, 0, 4, 2, 2, 2}, {2, 3});
  EXPECT_TRUE(testing::gradcheck([idx](const auto& in) { return embedding(idx, in[0]); }, {w}));
  // The padding row gets no gradient by design (numeric differences would see it): pad an unused row.
  EXPECT_TRUE(testing::gradcheck([idx](const auto& in) { return embedding(idx, in[0], 1); }, {w}));
}

TEST(Embedding, NonContiguousInputs) {
  const Tensor base = table(3, 4);  // read transposed: weight [4, 3]
  const Tensor w = base.permute({1, 0});
  const Tensor idx = Tensor::from_vector<int64_t>({3, 0, 1, 2, 2, 0}, {2, 3}).permute({1, 0});
  ASSERT_FALSE(w.is_contiguous());
  ASSERT_FALSE(idx.is_contiguous());
  EXPECT_EQ(embedding(idx, w).shape(), Shape({3, 2, 3}));
  EXPECT_EQ(embedding(idx, w).to_vector<double>(),
            embedding(idx.contiguous(), w.contiguous()).to_vector<double>());
}

TEST(Embedding, ErrorsNameShapesAndIndices) {
  const Tensor w = table(4, 3);
  try {
    embedding(Tensor::from_vector<int64_t>({0, 4, 1}, {3}), w);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("index 4 at position 1 is outside [0, 4) for weight [4, 3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(embedding(Tensor::from_vector<int64_t>({-1}, {1}), w), ValueError);
  EXPECT_THROW(embedding(Tensor::zeros({2}), w), DTypeError);
  EXPECT_THROW(embedding(Tensor::from_vector<int64_t>({0}, {1}), Tensor::zeros({12})), ShapeError);
  EXPECT_THROW(embedding(Tensor::from_vector<int64_t>({0}, {1}), w, 4), ValueError);
  EXPECT_THROW(embedding(Tensor::from_vector<int64_t>({0}, {1}), w, -5), ValueError);
}

}  // namespace
}  // namespace liftoff
