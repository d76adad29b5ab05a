// Autocast's half weight caches on the CPU: the registry follows every cache through construction, copies,
// moves and destruction, and the CPU keeps its per-tensor path (one cast per cache at its own get()).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "runtime/autocast.h"
#include "runtime/config.h"
#include "runtime/tensor.h"

namespace liftoff {
namespace {

Tensor weights(float first, int64_t n = 6) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + 0.1f * static_cast<float>(i));
  return Tensor::from_vector(v, {2, n / 2});
}

void expect_cast_of(const Tensor& copy, const Tensor& master, DType dtype) {
  ASSERT_EQ(copy.dtype(), dtype);
  EXPECT_EQ(copy.to_vector<float>(), master.to(dtype).to_vector<float>());
}

TEST(HalfWeightCacheRegistry, FollowsConstructionCopiesMovesAndDestruction) {
  const size_t before = half_weight_cache_count();
  {
    HalfWeightCache a;
    EXPECT_EQ(half_weight_cache_count(), before + 1);
    HalfWeightCache b(a);
    HalfWeightCache c(std::move(a));
    EXPECT_EQ(half_weight_cache_count(), before + 3);
    std::vector<HalfWeightCache> many(4);
    EXPECT_EQ(half_weight_cache_count(), before + 7);
    many.reserve(64);  // moves every element: the old ones leave, the new ones join
    EXPECT_EQ(half_weight_cache_count(), before + 7);
    b = c;
    c = std::move(b);
    EXPECT_EQ(half_weight_cache_count(), before + 7);
  }
  EXPECT_EQ(half_weight_cache_count(), before);
}

TEST(HalfWeightCacheCpu, RefreshesOncePerWeightVersion) {
  const Tensor master = weights(1.0f);
  HalfWeightCache cache;
  expect_cast_of(cache.get(master, DType::bf16), master, DType::bf16);
  const Tensor first = master.to(DType::bf16);
  master.fill_(2.0);  // without a new version the cached copy stays
  expect_cast_of(cache.get(master, DType::bf16), first, DType::bf16);
  advance_weight_version();
  expect_cast_of(cache.get(master, DType::bf16), master, DType::bf16);
  expect_cast_of(cache.get(master, DType::f16), master, DType::f16);  // another dtype: cast again
}

TEST(HalfWeightCacheCpu, CopiesAndMovesStayCorrect) {
  const Tensor master = weights(1.0f);
  HalfWeightCache original;
  const Tensor first = original.get(master, DType::bf16);
  HalfWeightCache copy(original);
  expect_cast_of(copy.get(master, DType::bf16), master, DType::bf16);
  advance_weight_version();
  master.fill_(-3.0);
  expect_cast_of(copy.get(master, DType::bf16), master, DType::bf16);
  expect_cast_of(first, weights(1.0f), DType::bf16);  // the copy's refresh left the shared old copy alone
  HalfWeightCache moved(std::move(original));
  expect_cast_of(moved.get(master, DType::bf16), master, DType::bf16);
  const Tensor other = weights(5.0f);
  expect_cast_of(original.get(other, DType::bf16), other, DType::bf16);  // NOLINT: moved-from still works
}

TEST(HalfWeightCacheCpu, AnotherMasterIsCastAfresh) {
  HalfWeightCache cache;
  const Tensor a = weights(1.0f), b = weights(-1.0f);
  expect_cast_of(cache.get(a, DType::bf16), a, DType::bf16);
  expect_cast_of(cache.get(b, DType::bf16), b, DType::bf16);  // same version, other storage
}

TEST(HalfWeightCacheCpu, TheKnobIsOnlyReadOnCuda) {
  // The CPU has one path whatever LIFTOFF_WEIGHT_CAST says; a malformed value is not even read here.
  config::ScopedSetting bad(config::Knob::weight_cast, "sometimes");
  const Tensor master = weights(0.5f);
  HalfWeightCache cache;
  advance_weight_version();
  expect_cast_of(cache.get(master, DType::f16), master, DType::f16);
  EXPECT_THROW(config::get_string(config::Knob::weight_cast), ValueError);
}

}  // namespace
}  // namespace liftoff
