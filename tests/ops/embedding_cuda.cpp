#include <gtest/gtest.h>

#include <cmath>

#include "ops/embedding/embedding.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

// n indices in [0, num), heavily repeated (a few rows take most positions, as frequent tokens do).
Tensor skewed_indices(int64_t n, int64_t num, uint64_t seed, const Shape& shape) {
  const std::vector<double> u = testing::random_tensor({n}, seed, 0, 1).to_vector<double>();
  std::vector<int64_t> idx;
  for (double v : u) idx.push_back(static_cast<int64_t>(v * v * v * static_cast<double>(num)));
  return Tensor::from_vector<int64_t>(idx, shape);
}

TEST(EmbeddingCuda, MatchesCpuInAllDtypes) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor idx = skewed_indices(6 * 70, 50, 1, {6, 70});
  for (const testing::DtypeCase& d : testing::all_dtype_cases(8.0)) {
    const Tensor w = testing::random_tensor({50, 33}, 2, -1, 1, d.cpu_dtype()).set_requires_grad(true);
    EXPECT_TRUE(
        testing::cuda_parity([](const auto& in) { return embedding(in[0], in[1]); }, {idx, w}, d.options()))
        << d.name();
    EXPECT_TRUE(testing::cuda_parity([](const auto& in) { return embedding(in[0], in[1], 0); },
                                     {idx.to(DType::i32), w}, d.options()))
        << "padding_idx 0, i32 indices, " << d.name();
  }
}

TEST(EmbeddingCuda, BackwardIsBitwiseDeterministic) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor idx = skewed_indices(20000, 1000, 3, {20000}).to(Device::cuda());
  const Tensor gy = testing::random_tensor({20000, 64}, 4, -1, 1, DType::f32).to(Device::cuda());
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    const Tensor w = Tensor::zeros({1000, 64}, DType::f32, Device::cuda()).set_requires_grad(true);
    embedding(idx, w).backward(gy);
    const std::vector<float> g = w.grad().to_vector<float>();
    if (run == 0) {
      first = g;
    } else {
      EXPECT_EQ(g, first) << "run " << run;
    }
  }
}

TEST(EmbeddingCuda, BadIndexGivesNanRowWithoutThrowing) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor w = Tensor::ones({4, 3}, DType::f32, Device::cuda());
  const std::vector<float> y =
      embedding(Tensor::from_vector<int64_t>({1, 7}, {2}, Device::cuda()), w).to_vector<float>();
  EXPECT_EQ(y[0], 1.f);
  EXPECT_TRUE(std::isnan(y[3]));
}

}  // namespace
}  // namespace liftoff
