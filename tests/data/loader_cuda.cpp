#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "data/augment.h"
#include "data/loader.h"
#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include "data/augment_cuda.h"
#endif

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA
std::vector<int64_t> some_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (i * 7919) % 100003;  // spread over a large set
  return v;
}

void expect_bitwise(const Tensor& got, const Tensor& expected, const char* what) {
  const auto g = got.to(Device::cpu()).to_vector<float>();
  const auto e = expected.to_vector<float>();
  ASSERT_EQ(g.size(), e.size()) << what;
  size_t mismatches = 0;
  for (size_t i = 0; i < g.size(); ++i) mismatches += std::memcmp(&g[i], &e[i], sizeof(float)) != 0;
  EXPECT_EQ(mismatches, 0u) << what;
}
#endif

TEST(AugmentCuda, EqualsCpuTwinExactly) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const ImageDataset ds = make_synthetic_dataset(64, 3, 32, 30, 10, 5);
  const Tensor gpu_images = ds.images.to(Device::cuda(0));
  const auto indices = some_indices(64);
  AugmentConfig crop_flip;
  crop_flip.pad = 4;
  AugmentConfig erase = crop_flip;
  erase.erase_prob = 0.7f;
  for (const AugmentConfig& config : {crop_flip, erase}) {
    for (int64_t epoch : {0, 3}) {
      const Tensor cpu = augment_batch(ds.images, indices, 11, epoch, config, ds.mean, ds.stddev);
      const Tensor gpu = cuda::augment_batch_cuda(gpu_images, indices, 11, epoch, config, ds.mean, ds.stddev);
      expect_bitwise(gpu, cpu, config.erase_prob > 0 ? "crop+flip+erase" : "crop+flip");
    }
  }
  const Tensor cpu_norm = normalize_batch(ds.images, ds.mean, ds.stddev);
  const Tensor gpu_norm =
      cuda::augment_batch_cuda(gpu_images, indices, 11, 0, crop_flip, ds.mean, ds.stddev, DType::f32, false);
  expect_bitwise(gpu_norm, cpu_norm, "normalize only");
#endif
}

TEST(AugmentCuda, HalfOutputsWithinOneUlpOfTheF32Twin) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const ImageDataset ds = make_synthetic_dataset(16, 3, 16, 16, 10, 6);
  const auto indices = some_indices(16);
  const Tensor cpu = augment_batch(ds.images, indices, 3, 1, AugmentConfig{}, ds.mean, ds.stddev);
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor gpu = cuda::augment_batch_cuda(ds.images.to(Device::cuda(0)), indices, 3, 1, AugmentConfig{},
                                                ds.mean, ds.stddev, dtype);
    ASSERT_EQ(gpu.dtype(), dtype);
    const Tensor expected = cpu.to(dtype);  // round to nearest even on the host
    const Tensor got = gpu.to(Device::cpu());
    const auto* a = static_cast<const uint16_t*>(got.raw_data());
    const auto* b = static_cast<const uint16_t*>(expected.raw_data());
    int64_t worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      worst = std::max<int64_t>(worst, std::abs(int64_t{a[i]} - int64_t{b[i]}));
    EXPECT_LE(worst, 1) << dtype_name(dtype);
  }
#endif
}

std::vector<Batch> epoch_batches(BatchSource& s, int64_t epoch) {
  s.start_epoch(epoch);
  std::vector<Batch> out;
  Batch b;
  while (s.next(b)) out.push_back(b);
  return out;
}

void expect_same_batches(const std::vector<Batch>& got, const std::vector<Batch>& expected,
                         const char* what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].indices, expected[i].indices) << what << " batch " << i;
    EXPECT_EQ(got[i].labels.to(Device::cpu()).to_vector<int64_t>(),
              expected[i].labels.to(Device::cpu()).to_vector<int64_t>())
        << what << " batch " << i;
    const auto g = got[i].input.to(Device::cpu()).to_vector<float>();
    const auto e = expected[i].input.to(Device::cpu()).to_vector<float>();
    ASSERT_EQ(g.size(), e.size()) << what << " batch " << i;
    EXPECT_EQ(std::memcmp(g.data(), e.data(), g.size() * sizeof(float)), 0) << what << " batch " << i;
  }
}

LoaderOptions gpu_options(AugmentMode mode, bool pin, int prefetch) {
  LoaderOptions o;
  o.batch = 24;
  o.workers = 3;
  o.prefetch = prefetch;
  o.pin_memory = pin;
  o.seed = 17;
  o.augment = mode;
  o.augment_config.erase_prob = 0.3f;
  o.device = Device::cuda(0);
  return o;
}

TEST(DataLoaderCuda, GpuBatchesEqualCpuBatches) {
  LIFTOFF_REQUIRE_CUDA();
  const ImageDataset ds = make_synthetic_dataset(150, 3, 20, 20, 10, 8);
  LoaderOptions cpu_opts = gpu_options(AugmentMode::cpu, true, 2);
  cpu_opts.device = Device::cpu();
  DataLoader cpu(ds, cpu_opts);
  const auto reference = epoch_batches(cpu, 2);
  for (AugmentMode mode : {AugmentMode::gpu, AugmentMode::cpu}) {
    for (bool pin : {true, false}) {
      DataLoader gpu(ds, gpu_options(mode, pin, 3));
      EXPECT_EQ(gpu.augment_mode(), mode);
      const auto got = epoch_batches(gpu, 2);
      for (const Batch& b : got) {
        EXPECT_TRUE(b.input.is_cuda());
        EXPECT_TRUE(b.labels.is_cuda());
        EXPECT_FALSE(b.images_u8.defined());
      }
      expect_same_batches(got, reference, pin ? "pinned" : "pageable");
    }
  }
  // Normalise only on the device equals the CPU.
  cpu_opts.augment = AugmentMode::none;
  DataLoader cpu_eval(ds, cpu_opts);
  DataLoader gpu_eval(ds, gpu_options(AugmentMode::none, true, 2));
  expect_same_batches(epoch_batches(gpu_eval, 0), epoch_batches(cpu_eval, 0), "normalize only");
}

TEST(DataLoaderCuda, StressPrefetchOneAndStats) {
  LIFTOFF_REQUIRE_CUDA();
  const ImageDataset ds = make_synthetic_dataset(53, 3, 12, 12, 10, 4);
  InOrderOptions ro;
  ro.batch = 8;
  ro.seed = 17;
  ro.augment_config.erase_prob = 0.3f;
  InOrderBatches reference(ds, ro);
  LoaderOptions o = gpu_options(AugmentMode::gpu, true, 1);
  o.batch = 8;
  DataLoader loader(ds, o);
  for (int64_t epoch = 0; epoch < 25; ++epoch) {
    // All batches of the epoch are kept: a staging buffer overwritten early would corrupt an earlier one.
    expect_same_batches(epoch_batches(loader, epoch), epoch_batches(reference, epoch), "stress");
  }
  synchronize(Device::cuda(0));
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, 25 * 7);
  EXPECT_GT(s.h2d_bytes, 0);
  EXPECT_GT(s.h2d_timed, 0);
  EXPECT_GT(s.h2d_ms, 0.0);
  EXPECT_GT(s.augment_timed, 0);
  EXPECT_GT(s.augment_ms, 0.0);
}

TEST(DataLoaderCuda, DestroyMidEpoch) {
  LIFTOFF_REQUIRE_CUDA();
  const ImageDataset ds = make_synthetic_dataset(300, 3, 16, 16, 10, 2);
  for (int i = 0; i < 20; ++i) {
    DataLoader loader(ds, gpu_options(i % 2 ? AugmentMode::gpu : AugmentMode::cpu, i % 3 != 0, 1 + i % 3));
    loader.start_epoch(i);
    Batch b;
    ASSERT_TRUE(loader.next(b));
    ASSERT_TRUE(loader.next(b));
  }
}

}  // namespace
}  // namespace liftoff
