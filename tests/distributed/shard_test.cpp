// The distributed sampler of DataLoader: every rank cuts the same per-epoch permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"

namespace liftoff {
namespace {

LoaderOptions options_for(int rank, int world, bool even, int64_t batch = 4) {
  LoaderOptions o;
  o.batch = batch;
  o.workers = 1;
  o.prefetch = 1;
  o.seed = 7;
  o.rank = rank;
  o.world_size = world;
  o.even_shards = even;
  o.augment = AugmentMode::none;
  return o;
}

TEST(Shards, ExactShardsCoverEverySampleOnce) {
  const ImageDataset data = make_synthetic_dataset(23, 1, 4, 4, 3, 1);
  DataLoader whole(data, options_for(0, 1, true));
  whole.start_epoch(2);
  const std::vector<int64_t> full = whole.order();
  std::vector<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DataLoader loader(data, options_for(r, 3, false));
    loader.start_epoch(2);
    const std::vector<int64_t>& shard = loader.order();
    EXPECT_EQ(static_cast<int64_t>(shard.size()), loader.shard_size());
    for (size_t k = 0; k < shard.size(); ++k) EXPECT_EQ(shard[k], full[k * 3 + static_cast<size_t>(r)]);
    seen.insert(seen.end(), shard.begin(), shard.end());
  }
  EXPECT_EQ(seen.size(), 23u);
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
}

TEST(Shards, EvenShardsPadFromTheStartAndAgreeOnBatchCount) {
  const ImageDataset data = make_synthetic_dataset(10, 1, 4, 4, 3, 1);
  DataLoader whole(data, options_for(0, 1, true));
  whole.start_epoch(0);
  const std::vector<int64_t> full = whole.order();
  for (int r = 0; r < 4; ++r) {
    DataLoader loader(data, options_for(r, 4, true, 2));
    loader.start_epoch(0);
    EXPECT_EQ(loader.shard_size(), 3);  // ceil(10 / 4)
    EXPECT_EQ(loader.batches_per_epoch(), 2);
    ASSERT_EQ(loader.order().size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(loader.order()[k], full[(k * 4 + static_cast<size_t>(r)) % 10]);
  }
}

TEST(Shards, BatchesCarryTheShard) {
  const ImageDataset data = make_synthetic_dataset(9, 1, 4, 4, 3, 1);
  DataLoader loader(data, options_for(1, 2, false, 2));
  loader.start_epoch(1);
  std::vector<int64_t> got;
  Batch batch;
  while (loader.next(batch)) got.insert(got.end(), batch.indices.begin(), batch.indices.end());
  EXPECT_EQ(got, loader.order());
  EXPECT_EQ(got.size(), 4u);  // positions 1, 3, 5, 7 of 9
}

TEST(Shards, PermutationChangesWithEpochButNotWithRank) {
  const ImageDataset data = make_synthetic_dataset(16, 1, 4, 4, 3, 1);
  DataLoader a(data, options_for(0, 2, true));
  DataLoader b(data, options_for(1, 2, true));
  a.start_epoch(0);
  b.start_epoch(0);
  std::vector<int64_t> e0 = a.order();
  e0.insert(e0.end(), b.order().begin(), b.order().end());
  std::sort(e0.begin(), e0.end());
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(e0[static_cast<size_t>(i)], i);  // disjoint halves of one permutation
  const std::vector<int64_t> first = a.order();
  a.start_epoch(1);
  EXPECT_NE(a.order(), first);
}

TEST(Shards, BadRankIsRejected) {
  const ImageDataset data = make_synthetic_dataset(8, 1, 4, 4, 3, 1);
  EXPECT_THROW(DataLoader(data, options_for(2, 2, true)), ValueError);
  EXPECT_THROW(DataLoader(data, options_for(0, 0, true)), ValueError);
  LoaderOptions o = options_for(0, 4, true, 3);
  o.drop_last = true;  // 2 samples per rank: no full batch of 3
  EXPECT_THROW(DataLoader(data, o), ValueError);
}

}  // namespace
}  // namespace liftoff
