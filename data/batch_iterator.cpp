#include "data/batch_iterator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "data/augment.h"
#include "runtime/parallel.h"
#include "runtime/random.h"

namespace liftoff {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

BatchSource::~BatchSource() = default;

uint64_t shuffle_seed(uint64_t seed, int64_t epoch) {
  return splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch) + 0x53485546464C4531ull));
}

InOrderBatches::InOrderBatches(ImageDataset dataset, InOrderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  LIFTOFF_CHECK(dataset_.images.defined() && dataset_.labels.defined(), ValueError,
                "InOrderBatches: the data set has no images or labels");
  LIFTOFF_CHECK(
      dataset_.images.dtype() == DType::u8 && dataset_.images.dim() == 4 && dataset_.images.device().is_cpu(),
      ShapeError, "InOrderBatches: expected u8 CPU images [N, C, H, W], got ",
      dtype_name(dataset_.images.dtype()), " ", shape_str(dataset_.images.shape()), " on ",
      dataset_.images.device().str());
  LIFTOFF_CHECK(dataset_.labels.dtype() == DType::i64 && dataset_.labels.dim() == 1 &&
                    dataset_.labels.size(0) == dataset_.size() && dataset_.labels.device().is_cpu(),
                ShapeError, "InOrderBatches: expected i64 CPU labels [", dataset_.size(), "], got ",
                dtype_name(dataset_.labels.dtype()), " ", shape_str(dataset_.labels.shape()));
  LIFTOFF_CHECK(options_.batch >= 1, ValueError, "InOrderBatches: batch size ", options_.batch,
                " must be at least 1 (--batch)");
  LIFTOFF_CHECK(!options_.drop_last || options_.batch <= dataset_.size(), ValueError,
                "InOrderBatches: batch size ", options_.batch, " with drop_last leaves no batch from ",
                dataset_.size(), " samples; use a smaller --batch (or --no-drop-last)");
  if (options_.augment) validate_augment_config(options_.augment_config);
  dataset_.images = dataset_.images.contiguous();
  dataset_.labels = dataset_.labels.contiguous();
}

int64_t InOrderBatches::batches_per_epoch() const {
  const int64_t n = dataset_.size();
  return options_.drop_last ? n / options_.batch : (n + options_.batch - 1) / options_.batch;
}

int64_t InOrderBatches::tail_batch_size() const {
  return options_.drop_last ? 0 : dataset_.size() % options_.batch;
}

void InOrderBatches::start_epoch(int64_t epoch) {
  LIFTOFF_CHECK(epoch >= 0, ValueError, "InOrderBatches: epoch ", epoch, " is negative");
  if (options_.shuffle) {
    Generator gen(shuffle_seed(options_.seed, epoch));
    order_ = randperm(dataset_.size(), gen);
  } else {
    order_.resize(static_cast<size_t>(dataset_.size()));
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
  epoch_ = epoch;
  step_ = 0;
}

bool InOrderBatches::next(Batch& out) {
  LIFTOFF_CHECK(epoch_ >= 0, ValueError, "InOrderBatches: call start_epoch() before next()");
  if (step_ >= batches_per_epoch()) return false;
  const int64_t begin = step_ * options_.batch;
  const int64_t end = std::min<int64_t>(begin + options_.batch, dataset_.size());
  const int64_t count = end - begin;
  const int64_t sample = dataset_.channels() * dataset_.height() * dataset_.width();

  out.indices.assign(order_.begin() + begin, order_.begin() + end);
  out.epoch = epoch_;
  out.step_in_epoch = step_;
  out.images_u8 = Tensor::empty({count, dataset_.channels(), dataset_.height(), dataset_.width()}, DType::u8,
                                Device::cpu());
  Tensor labels = Tensor::empty({count}, DType::i64, Device::cpu());
  const uint8_t* src = dataset_.images.data<uint8_t>();
  const int64_t* src_labels = dataset_.labels.data<int64_t>();
  uint8_t* dst = out.images_u8.data<uint8_t>();
  int64_t* dst_labels = labels.data<int64_t>();
  parallel_for(0, count, std::max<int64_t>(1, 65536 / sample), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const int64_t index = out.indices[static_cast<size_t>(b)];
      std::memcpy(dst + b * sample, src + index * sample, static_cast<size_t>(sample));
      dst_labels[b] = src_labels[index];
    }
  });
  out.labels = labels.to(options_.device);
  out.input = make_input(out);
  ++step_;
  return true;
}

Tensor InOrderBatches::make_input(const Batch& batch) const {
  const Tensor host = options_.augment
                          ? augment_batch(batch.images_u8, batch.indices, options_.seed, batch.epoch,
                                          options_.augment_config, dataset_.mean, dataset_.stddev)
                          : normalize_batch(batch.images_u8, dataset_.mean, dataset_.stddev);
  return host.to(options_.device);
}

}  // namespace liftoff
