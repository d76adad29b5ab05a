#include "data/batch_iterator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "data/augment.h"

namespace liftoff {
namespace {

InOrderOptions options(int64_t batch, bool shuffle, bool drop_last, uint64_t seed = 1) {
  InOrderOptions o;
  o.batch = batch;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  return o;
}

std::vector<std::vector<int64_t>> epoch_indices(BatchSource& source, int64_t epoch) {
  source.start_epoch(epoch);
  std::vector<std::vector<int64_t>> out;
  Batch b;
  while (source.next(b)) out.push_back(b.indices);
  return out;
}

TEST(InOrderBatches, EverySampleOncePerEpoch) {
  InOrderBatches it(make_synthetic_dataset(10, 1, 4, 4, 3, 0), options(3, true, false));
  EXPECT_EQ(it.batches_per_epoch(), 4);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto batches = epoch_indices(it, epoch);
    ASSERT_EQ(batches.size(), 4u);
    EXPECT_EQ(batches.back().size(), 1u);
    std::vector<int64_t> all;
    for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expected(10);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected);
  }
}

TEST(InOrderBatches, DropLast) {
  InOrderBatches it(make_synthetic_dataset(10, 1, 4, 4, 3, 0), options(3, true, true));
  EXPECT_EQ(it.batches_per_epoch(), 3);
  EXPECT_EQ(it.tail_batch_size(), 0);  // dropped: every batch the trainer sees is full
  EXPECT_EQ(
      InOrderBatches(make_synthetic_dataset(10, 1, 4, 4, 3, 0), options(3, true, false)).tail_batch_size(),
      1);
  const auto batches = epoch_indices(it, 0);
  ASSERT_EQ(batches.size(), 3u);
  std::vector<int64_t> all;
  for (const auto& b : batches) {
    EXPECT_EQ(b.size(), 3u);
    all.insert(all.end(), b.begin(), b.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  // Exact multiple: nothing dropped.
  InOrderBatches even(make_synthetic_dataset(9, 1, 4, 4, 3, 0), options(3, false, true));
  EXPECT_EQ(even.batches_per_epoch(), 3);
  EXPECT_EQ(
      InOrderBatches(make_synthetic_dataset(9, 1, 4, 4, 3, 0), options(3, false, false)).tail_batch_size(),
      0);
  EXPECT_THROW(InOrderBatches(make_synthetic_dataset(2, 1, 4, 4, 3, 0), options(3, false, true)), ValueError);
}

TEST(InOrderBatches, SequentialWithoutShuffle) {
  InOrderBatches it(make_synthetic_dataset(7, 1, 4, 4, 3, 0), options(4, false, false));
  const auto batches = epoch_indices(it, 5);
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6}}));
}

TEST(InOrderBatches, DeterministicBySeedAndEpochsDiffer) {
  const ImageDataset ds = make_synthetic_dataset(100, 1, 4, 4, 3, 0);
  InOrderBatches a(ds, options(16, true, false, 42));
  InOrderBatches b(ds, options(16, true, false, 42));
  InOrderBatches c(ds, options(16, true, false, 43));
  EXPECT_EQ(epoch_indices(a, 0), epoch_indices(b, 0));
  EXPECT_EQ(epoch_indices(a, 7), epoch_indices(b, 7));
  EXPECT_NE(epoch_indices(a, 0), epoch_indices(c, 0));
  EXPECT_NE(epoch_indices(a, 0), epoch_indices(a, 1));
  // Restarting an epoch replays it.
  EXPECT_EQ(epoch_indices(a, 1), epoch_indices(a, 1));
  EXPECT_NE(shuffle_seed(42, 0), shuffle_seed(42, 1));
}

TEST(InOrderBatches, BatchContents) {
  const ImageDataset ds = make_synthetic_dataset(20, 2, 5, 6, 4, 9);
  InOrderBatches it(ds, options(8, true, false, 3));
  it.start_epoch(2);
  Batch batch;
  int64_t step = 0;
  const int64_t sample = 2 * 5 * 6;
  const auto all_labels = ds.labels.to_vector<int64_t>();
  while (it.next(batch)) {
    const int64_t n = static_cast<int64_t>(batch.indices.size());
    EXPECT_EQ(batch.epoch, 2);
    EXPECT_EQ(batch.step_in_epoch, step++);
    EXPECT_EQ(batch.images_u8.shape(), (Shape{n, 2, 5, 6}));
    EXPECT_EQ(batch.input.shape(), (Shape{n, 2, 5, 6}));
    EXPECT_EQ(batch.input.dtype(), DType::f32);
    EXPECT_EQ(batch.labels.dtype(), DType::i64);
    const auto labels = batch.labels.to_vector<int64_t>();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t index = batch.indices[static_cast<size_t>(k)];
      EXPECT_EQ(labels[static_cast<size_t>(k)], all_labels[static_cast<size_t>(index)]);
      EXPECT_EQ(0, std::memcmp(batch.images_u8.data<uint8_t>() + k * sample,
                               ds.images.data<uint8_t>() + index * sample, static_cast<size_t>(sample)));
    }
    const Tensor expected =
        augment_batch(batch.images_u8, batch.indices, 3, 2, AugmentConfig{}, ds.mean, ds.stddev);
    EXPECT_EQ(batch.input.to_vector<float>(), expected.to_vector<float>());
    EXPECT_EQ(it.make_input(batch).to_vector<float>(), expected.to_vector<float>());
  }
  EXPECT_EQ(step, 3);
  EXPECT_FALSE(it.next(batch));
}

TEST(InOrderBatches, EvalPathNormalisesOnly) {
  const ImageDataset ds = make_synthetic_dataset(6, 1, 4, 4, 2, 1);
  InOrderOptions o = options(6, false, false);
  o.augment = false;
  InOrderBatches it(ds, o);
  it.start_epoch(0);
  Batch batch;
  ASSERT_TRUE(it.next(batch));
  EXPECT_EQ(batch.input.to_vector<float>(),
            normalize_batch(ds.images, ds.mean, ds.stddev).to_vector<float>());
}

TEST(InOrderBatches, SampleAugmentationIndependentOfBatchSize) {
  // The same sample gets the same pixels whether it travels in a batch of 4 or of 7.
  const ImageDataset ds = make_synthetic_dataset(28, 1, 8, 8, 2, 1);
  InOrderOptions o = options(4, true, false, 5);
  o.augment_config.erase_prob = 0.5f;
  InOrderBatches small(ds, o);
  o.batch = 7;
  InOrderBatches large(ds, o);
  auto per_sample = [](InOrderBatches& it) {
    std::vector<std::vector<float>> out(28);
    it.start_epoch(3);
    Batch b;
    while (it.next(b)) {
      const auto v = b.input.to_vector<float>();
      for (size_t k = 0; k < b.indices.size(); ++k) {
        out[static_cast<size_t>(b.indices[k])].assign(v.begin() + static_cast<int64_t>(k * 64),
                                                      v.begin() + static_cast<int64_t>((k + 1) * 64));
      }
    }
    return out;
  };
  EXPECT_EQ(per_sample(small), per_sample(large));
}

TEST(InOrderBatches, RejectsMisuse) {
  const ImageDataset ds = make_synthetic_dataset(6, 1, 4, 4, 2, 1);
  EXPECT_THROW(InOrderBatches(ds, options(0, false, false)), ValueError);
  InOrderBatches it(ds, options(2, false, false));
  Batch b;
  EXPECT_THROW(it.next(b), ValueError);
  EXPECT_THROW(it.start_epoch(-1), ValueError);
  InOrderOptions bad = options(2, false, false);
  bad.augment_config.flip_prob = 2.0f;
  EXPECT_THROW(InOrderBatches(ds, bad), ValueError);
}

}  // namespace
}  // namespace liftoff
