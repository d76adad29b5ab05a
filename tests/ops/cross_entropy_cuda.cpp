#include <gtest/gtest.h>

#include <cmath>

#include "ops/cross_entropy/cross_entropy.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

Tensor random_labels(int64_t n, int64_t classes, uint64_t seed) {
  const std::vector<double> u = testing::random_tensor({n}, seed, 0, 1).to_vector<double>();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<int64_t>(u[i] * static_cast<double>(classes));
  return Tensor::from_vector<int64_t>(labels, {n});
}

TEST(CrossEntropyCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t classes : {10, 100, 1000}) {  // fewer classes than lanes, and several per lane
    const Tensor logits = testing::random_tensor({67, classes}, 1, -4, 4, DType::f32).set_requires_grad(true);
    const Tensor labels = random_labels(67, classes, 2);
    for (double s : {0.0, 0.1}) {
      EXPECT_TRUE(
          testing::cuda_parity([s](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], s); },
                               {logits, labels}, {/*atol=*/1e-6, /*rtol=*/1e-5}))
          << classes << " classes, smoothing " << s;
    }
  }
}

TEST(CrossEntropyCuda, MatchesCpuInBf16) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor logits = testing::random_tensor({32, 10}, 3, -2, 2, DType::f32).set_requires_grad(true);
  const Tensor labels = random_labels(32, 10, 4);
  testing::ParityOptions options;
  options.atol = 3e-2;  // logits rounded to bf16 (error up to ~8e-3 each), loss rounded to bf16
  options.rtol = 1e-2;
  options.cuda_dtype = DType::bf16;
  EXPECT_TRUE(
      testing::cuda_parity([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], 0.1); },
                           {logits, labels}, options));
}

TEST(CrossEntropyCuda, BadLabelGivesNanWithoutThrowing) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor logits = Tensor::zeros({3, 4}, DType::f32, Device::cuda()).set_requires_grad(true);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 7, 1}, {3}, Device::cuda());
  const Tensor loss = cross_entropy(logits, labels);
  EXPECT_TRUE(std::isnan(loss.item()));
  loss.backward();
  const std::vector<float> g = logits.grad().to_vector<float>();
  for (int j = 0; j < 4; ++j) {
    EXPECT_FALSE(std::isnan(g[j]));
    EXPECT_TRUE(std::isnan(g[4 + j]));  // the bad row
  }
}

}  // namespace
}  // namespace liftoff
