// Batches for the trainer. BatchSource is what the training loop consumes; InOrderBatches is the simple
// synchronous implementation (gather + augment on the calling thread); the prefetching pinned-memory
// DataLoader implements the same interface.
#pragma once
#include <cstdint>
#include <vector>

#include "data/augment_params.h"
#include "data/dataset.h"
#include "runtime/tensor.h"

namespace liftoff {

struct Batch {
  Tensor images_u8;  // u8 [B, C, H, W], gathered from the data set (host)
  Tensor input;      // f32 [B, C, H, W], augmented (training) or normalised (eval), on the requested device
  Tensor labels;     // i64 [B], on the requested device
  std::vector<int64_t> indices;  // data set sample index of each row
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
};

class BatchSource {
 public:
  virtual ~BatchSource();
  // Begins an epoch: fixes the sample order and rewinds to its first batch.
  virtual void start_epoch(int64_t epoch) = 0;
  // Fills out with the next batch of the current epoch; false when the epoch is over.
  virtual bool next(Batch& out) = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // Rows of each epoch's last batch when it is smaller than the others (the data set does not divide by the
  // batch and drop_last is off); 0 when every batch is full. The Trainer prepares that shape up front.
  virtual int64_t tail_batch_size() const { return 0; }
};

struct InOrderOptions {
  int64_t batch = 64;
  // Shuffled epochs: order = randperm(N, Generator(shuffle_seed(seed, epoch))). Otherwise 0..N-1.
  bool shuffle = true;
  bool drop_last = false;  // drop the last batch when it is smaller than `batch`
  // On: augment_batch with Philox(seed, epoch, sample index); off: normalize_batch (evaluation).
  bool augment = true;
  AugmentConfig augment_config;
  uint64_t seed = 0;
  Device device = Device::cpu();  // input and labels are built on the CPU, then moved here with Tensor::to
};

// The Generator seed of an epoch's shuffle: splitmix64(seed XOR splitmix64(epoch + 0x53485546464C4531
// "SHUFFLE1")), so different epochs (and seeds) give unrelated permutations and none shares a stream with the
// augmentation.
uint64_t shuffle_seed(uint64_t seed, int64_t epoch);

class InOrderBatches : public BatchSource {
 public:
  // The data set is held by value (tensor handles: no copy of the pixels).
  InOrderBatches(ImageDataset dataset, InOrderOptions options);

  void start_epoch(int64_t epoch) override;
  bool next(Batch& out) override;
  int64_t batches_per_epoch() const override;
  int64_t tail_batch_size() const override;

  // The model input for a batch whose images_u8, indices and epoch are set (next() calls this).
  Tensor make_input(const Batch& batch) const;
  // The sample order of the current epoch.
  const std::vector<int64_t>& order() const { return order_; }
  const ImageDataset& dataset() const { return dataset_; }
  const InOrderOptions& options() const { return options_; }

 private:
  ImageDataset dataset_;
  InOrderOptions options_;
  std::vector<int64_t> order_;
  int64_t epoch_ = -1;  // -1: no epoch started
  int64_t step_ = 0;
};

}  // namespace liftoff
