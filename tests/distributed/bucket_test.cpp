// Bucket assignment: sizes, reverse order, the cap, oversize parameters, one dtype per bucket; and the layout
// a DDP built on it uses (a world-size-1 MPI group is not needed for that: assign_buckets is pure).
#include <gtest/gtest.h>

#include "models/train/ddp.h"

namespace liftoff {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

std::vector<BucketParam> f32_params(const std::vector<size_t>& bytes) {
  std::vector<BucketParam> out;
  for (size_t b : bytes) out.push_back({b, DType::f32});
  return out;
}

TEST(Buckets, ReverseOrderWithinCap) {
  // 4 params of 100 bytes, cap 250: two per bucket, last parameters first.
  EXPECT_EQ(assign_buckets(f32_params({100, 100, 100, 100}), 250), (Buckets{{3, 2}, {1, 0}}));
}

TEST(Buckets, FirstBucketHasItsOwnSmallerCap) {
  // cap 1000, first cap 150: the last parameter alone starts communicating; the rest share one bucket.
  EXPECT_EQ(assign_buckets(f32_params({100, 100, 100, 100}), 1000, 150), (Buckets{{3}, {2, 1, 0}}));
  // A first cap of 0 means "same as cap".
  EXPECT_EQ(assign_buckets(f32_params({100, 100, 100, 100}), 1000, 0), (Buckets{{3, 2, 1, 0}}));
  // A parameter at or above the first cap gets the first bucket to itself.
  EXPECT_EQ(assign_buckets(f32_params({100, 200}), 1000, 150), (Buckets{{1}, {0}}));
}

TEST(Buckets, AllInOneWhenTheyFit) {
  EXPECT_EQ(assign_buckets(f32_params({10, 20, 30}), 1000), (Buckets{{2, 1, 0}}));
}

TEST(Buckets, ExactlyCapFitsAndOneMoreByteSplits) {
  EXPECT_EQ(assign_buckets(f32_params({50, 50}), 100), (Buckets{{1, 0}}));
  EXPECT_EQ(assign_buckets(f32_params({51, 50}), 100), (Buckets{{1}, {0}}));
}

TEST(Buckets, ParameterLargerThanCapGetsItsOwnBucket) {
  // Reverse order: 3 (10) opens a bucket, 2 (500 > cap) closes it and stands alone, then 1 and 0 share one.
  EXPECT_EQ(assign_buckets(f32_params({10, 10, 500, 10}), 100), (Buckets{{3}, {2}, {1, 0}}));
  // An oversize parameter at either end.
  EXPECT_EQ(assign_buckets(f32_params({1000, 10}), 100), (Buckets{{1}, {0}}));
  EXPECT_EQ(assign_buckets(f32_params({10, 1000}), 100), (Buckets{{1}, {0}}));
}

TEST(Buckets, SizesNeverExceedCapExceptSingletons) {
  const std::vector<size_t> bytes = {7, 300, 64, 64, 64, 128, 1, 255, 256, 90, 33};
  const size_t cap = 256;
  const Buckets buckets = assign_buckets(f32_params(bytes), cap);
  std::vector<int> seen(bytes.size(), 0);
  for (const auto& b : buckets) {
    size_t total = 0;
    for (size_t i : b) {
      total += bytes[i];
      ++seen[i];
    }
    if (b.size() > 1) {
      EXPECT_LE(total, cap);
    }
    for (size_t k = 1; k < b.size(); ++k) EXPECT_GT(b[k - 1], b[k]) << "reverse order inside a bucket";
  }
  for (int count : seen) EXPECT_EQ(count, 1) << "every parameter in exactly one bucket";
  // Buckets become ready in reverse parameter order: their first (highest) indices decrease.
  for (size_t k = 1; k < buckets.size(); ++k) EXPECT_GT(buckets[k - 1].front(), buckets[k].front());
}

TEST(Buckets, OneDtypePerBucket) {
  const std::vector<BucketParam> params = {
      {40, DType::f32}, {40, DType::bf16}, {40, DType::f32}, {40, DType::bf16}};
  const Buckets buckets = assign_buckets(params, 1000);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0], (std::vector<size_t>{3, 1}));  // bf16, opened first (parameter 3)
  EXPECT_EQ(buckets[1], (std::vector<size_t>{2, 0}));  // f32
}

TEST(Buckets, EmptyAndBadCap) {
  EXPECT_TRUE(assign_buckets({}, 100).empty());
  EXPECT_THROW(assign_buckets(f32_params({1}), 0), ValueError);
}

TEST(Buckets, DefaultCapIs25MiB) {
  EXPECT_DOUBLE_EQ(DDPOptions{}.bucket_cap_mb, 25.0);
  // ResNet-like sizes: 10 MiB tensors, three fit under 25 MiB only twice.
  const size_t mib = 1024 * 1024;
  const Buckets buckets = assign_buckets(f32_params({10 * mib, 10 * mib, 10 * mib, 10 * mib}), 25 * mib);
  EXPECT_EQ(buckets, (Buckets{{3, 2}, {1, 0}}));
}

}  // namespace
}  // namespace liftoff
