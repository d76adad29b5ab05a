#include "data/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "data/augment.h"
#include "data/image_io.h"

#include <unistd.h>

namespace liftoff {
namespace {

struct HostBatch {
  std::vector<int64_t> indices;
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  std::vector<float> input;
  int64_t step = 0;
};

HostBatch to_host(const Batch& b) {
  HostBatch h;
  h.indices = b.indices;
  if (b.images_u8.defined()) h.images = b.images_u8.to_vector<uint8_t>();
  h.labels = b.labels.to_vector<int64_t>();
  h.input = b.input.to_vector<float>();
  h.step = b.step_in_epoch;
  return h;
}

std::vector<HostBatch> run_epoch(BatchSource& source, int64_t epoch) {
  source.start_epoch(epoch);
  std::vector<HostBatch> out;
  Batch b;
  while (source.next(b)) out.push_back(to_host(b));
  return out;
}

// Bitwise: the loader must reproduce InOrderBatches exactly, not approximately.
void expect_same(const std::vector<HostBatch>& a, const std::vector<HostBatch>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].indices, b[i].indices) << what << " batch " << i;
    EXPECT_EQ(a[i].images, b[i].images) << what << " batch " << i;
    EXPECT_EQ(a[i].labels, b[i].labels) << what << " batch " << i;
    ASSERT_EQ(a[i].input.size(), b[i].input.size()) << what << " batch " << i;
    EXPECT_EQ(std::memcmp(a[i].input.data(), b[i].input.data(), a[i].input.size() * sizeof(float)), 0)
        << what << " batch " << i;
    EXPECT_EQ(a[i].step, b[i].step) << what << " batch " << i;
  }
}

AugmentConfig erase_config() {
  AugmentConfig c;
  c.pad = 2;
  c.erase_prob = 0.5f;
  return c;
}

LoaderOptions loader_options(int workers, int prefetch, int64_t batch = 10) {
  LoaderOptions o;
  o.batch = batch;
  o.workers = workers;
  o.prefetch = prefetch;
  o.seed = 42;
  o.augment = AugmentMode::cpu;
  o.augment_config = erase_config();
  return o;
}

InOrderOptions reference_options(int64_t batch = 10, bool augment = true) {
  InOrderOptions o;
  o.batch = batch;
  o.seed = 42;
  o.augment = augment;
  o.augment_config = erase_config();
  return o;
}

TEST(DataLoader, SameBatchesAsInOrderForAnyWorkerCount) {
  const ImageDataset ds = make_synthetic_dataset(103, 3, 8, 8, 5, 7);
  InOrderBatches reference(ds, reference_options());
  const auto epoch0 = run_epoch(reference, 0);
  const auto epoch1 = run_epoch(reference, 1);
  ASSERT_EQ(epoch0.size(), 11u);
  for (int workers : {1, 2, 8}) {
    DataLoader loader(ds, loader_options(workers, 3));
    EXPECT_EQ(loader.augment_mode(), AugmentMode::cpu);
    EXPECT_EQ(loader.batches_per_epoch(), 11);
    expect_same(run_epoch(loader, 0), epoch0, "epoch 0, workers " + std::to_string(workers));
    expect_same(run_epoch(loader, 1), epoch1, "epoch 1, workers " + std::to_string(workers));
  }
}

TEST(DataLoader, NormalizeOnlyAndSequential) {
  const ImageDataset ds = make_synthetic_dataset(25, 1, 6, 5, 3, 3);
  InOrderOptions ro = reference_options(4, false);
  ro.shuffle = false;
  InOrderBatches reference(ds, ro);
  LoaderOptions o = loader_options(3, 2, 4);
  o.shuffle = false;
  o.augment = AugmentMode::none;
  DataLoader loader(ds, o);
  const auto got = run_epoch(loader, 5);
  expect_same(got, run_epoch(reference, 5), "normalize only");
  std::vector<int64_t> all;
  for (const auto& b : got) all.insert(all.end(), b.indices.begin(), b.indices.end());
  std::vector<int64_t> expected(25);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
}

// Its workers name themselves (seen in `kill -USR1` stack dumps, top -H, gdb): lo-worker-<n>.
bool some_thread_is_named(const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) return true;
  }
  return false;
}

TEST(DataLoader, WorkerThreadsAreNamed) {
  if (!std::filesystem::exists("/proc/self/task")) GTEST_SKIP() << "no /proc/self/task on this system";
  const ImageDataset ds = make_synthetic_dataset(40, 1, 4, 4, 3, 0);
  DataLoader loader(ds, loader_options(2, 2, 4));
  run_epoch(loader, 0);
  const auto named = [](const std::string& name) {
    for (int i = 0; i < 200 && !some_thread_is_named(name); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return some_thread_is_named(name);
  };
  EXPECT_TRUE(named("lo-worker-0"));
  EXPECT_TRUE(named("lo-worker-1"));
}

TEST(DataLoader, DropLast) {
  const ImageDataset ds = make_synthetic_dataset(10, 1, 4, 4, 3, 0);
  LoaderOptions o = loader_options(2, 2, 3);
  o.drop_last = true;
  DataLoader dropping(ds, o);
  EXPECT_EQ(dropping.batches_per_epoch(), 3);
  EXPECT_EQ(dropping.tail_batch_size(), 0);
  const auto batches = run_epoch(dropping, 0);
  ASSERT_EQ(batches.size(), 3u);
  for (const auto& b : batches) EXPECT_EQ(b.indices.size(), 3u);
  o.drop_last = false;
  DataLoader keeping(ds, o);
  EXPECT_EQ(keeping.batches_per_epoch(), 4);
  EXPECT_EQ(keeping.tail_batch_size(), 1);
  const auto all = run_epoch(keeping, 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.back().indices.size(), 1u);
  EXPECT_EQ(all.back().labels.size(), 1u);
  o.drop_last = true;
  o.batch = 11;
  EXPECT_THROW(DataLoader(ds, o), ValueError);
}

TEST(DataLoader, DestroyMidEpochQuickly) {
  const ImageDataset ds = make_synthetic_dataset(200, 3, 8, 8, 5, 1);
  for (int i = 0; i < 50; ++i) {
    DataLoader loader(ds, loader_options(1 + i % 4, 1 + i % 3, 8));
    loader.start_epoch(i);
    Batch b;
    ASSERT_TRUE(loader.next(b));
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(b.step_in_epoch, 1);
  }
  // Never started, and started but never read.
  { DataLoader idle(ds, loader_options(4, 2)); }
  {
    DataLoader unread(ds, loader_options(4, 2));
    unread.start_epoch(0);
  }
}

TEST(DataLoader, RestartingAnEpochMidWayGivesTheFullNewEpoch) {
  const ImageDataset ds = make_synthetic_dataset(57, 3, 8, 8, 5, 2);
  InOrderBatches reference(ds, reference_options());
  DataLoader loader(ds, loader_options(3, 2));
  loader.start_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  expect_same(run_epoch(loader, 1), run_epoch(reference, 1), "restarted");
}

// A shuffling loader begins epoch e + 1 once epoch e's last batch is out (data/next_epoch_prefetch.h): the
// early batches are epoch e + 1's exactly, next() keeps reporting the epoch over until start_epoch(), and a
// start_epoch() for another epoch (a resumed run) drops them and gives that epoch's batches.
TEST(DataLoader, TheNextEpochBeginsEarlyAndAnotherEpochStillStartsAfresh) {
  const ImageDataset ds = make_synthetic_dataset(57, 3, 8, 8, 5, 2);
  InOrderBatches reference(ds, reference_options());
  DataLoader loader(ds, loader_options(3, 4));
  run_epoch(loader, 0);
  Batch b;
  EXPECT_FALSE(loader.next(b)) << "epoch 0 is over: the early epoch 1 waits for start_epoch(1)";
  EXPECT_FALSE(loader.next(b));
  expect_same(run_epoch(loader, 1), run_epoch(reference, 1), "epoch 1, begun early");
  expect_same(run_epoch(loader, 5), run_epoch(reference, 5), "epoch 5 after epoch 2 began early");
  expect_same(run_epoch(loader, 6), run_epoch(reference, 6), "epoch 6, begun early");
  // In order (evaluation): nothing begins early, every pass starts at start_epoch().
  LoaderOptions in_order = loader_options(2, 2);
  in_order.shuffle = false;
  InOrderOptions in_order_reference = reference_options();
  in_order_reference.shuffle = false;
  DataLoader eval(ds, in_order);
  InOrderBatches eval_reference(ds, in_order_reference);
  expect_same(run_epoch(eval, 0), run_epoch(eval_reference, 0), "in order, pass 1");
  expect_same(run_epoch(eval, 0), run_epoch(eval_reference, 0), "in order, pass 2");
}

// Many short epochs with a shallow ring: any buffer reused before its batch was consumed shows up as a batch
// whose pixels do not belong to its indices. Batches are kept until the epoch ends, so a later fill that
// wrote into a handed-out batch is caught too.
TEST(DataLoader, StressShallowRingChecksEveryBatch) {
  const ImageDataset ds = make_synthetic_dataset(37, 3, 6, 6, 4, 9);
  const int64_t sample = 3 * 6 * 6;
  const uint8_t* pixels = ds.images.data<uint8_t>();
  const int64_t* labels = ds.labels.data<int64_t>();
  for (int prefetch : {1, 2}) {
    DataLoader loader(ds, loader_options(3, prefetch, 4));
    for (int64_t epoch = 0; epoch < 40; ++epoch) {
      loader.start_epoch(epoch);
      std::vector<Batch> kept;
      Batch b;
      while (loader.next(b)) kept.push_back(b);
      ASSERT_EQ(kept.size(), 10u);
      for (const Batch& batch : kept) {
        const std::vector<uint8_t> got = batch.images_u8.to_vector<uint8_t>();
        const std::vector<int64_t> got_labels = batch.labels.to_vector<int64_t>();
        uint64_t expected_sum = 0, got_sum = 0;
        for (size_t r = 0; r < batch.indices.size(); ++r) {
          const int64_t index = batch.indices[r];
          for (int64_t k = 0; k < sample; ++k) {
            expected_sum +=
                static_cast<uint64_t>(pixels[index * sample + k]) * static_cast<uint64_t>(k + 1 + r);
            got_sum += static_cast<uint64_t>(got[r * sample + static_cast<size_t>(k)]) *
                       static_cast<uint64_t>(k + 1 + r);
          }
          ASSERT_EQ(got_labels[r], labels[index]) << "prefetch " << prefetch << " epoch " << epoch;
        }
        ASSERT_EQ(got_sum, expected_sum)
            << "prefetch " << prefetch << " epoch " << epoch << " step " << batch.step_in_epoch;
        const Tensor expected_input =
            augment_batch(batch.images_u8, batch.indices, 42, epoch, erase_config(), ds.mean, ds.stddev);
        const auto a = expected_input.to_vector<float>();
        const auto g = batch.input.to_vector<float>();
        ASSERT_EQ(std::memcmp(a.data(), g.data(), a.size() * sizeof(float)), 0);
      }
    }
  }
}

TEST(DataLoader, WorkerErrorIsRethrownInOrderWithTheFileName) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("liftoff_loader_error_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  std::vector<uint8_t> pixels(4 * 4, 100);
  for (int i = 0; i < 6; ++i) {
    write_image_file((root / "a" / ("img" + std::to_string(i) + ".png")).string(), pixels.data(), 1, 4, 4,
                     ImageFormat::png);
  }
  const std::string bad = (root / "b" / "broken.png").string();
  {
    std::FILE* f = std::fopen(bad.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a png", f);
    std::fclose(f);
  }
  auto folder = std::make_shared<ImageFolder>(root.string());
  ASSERT_EQ(folder->size(), 7);
  LoaderOptions o = loader_options(4, 3, 2);
  o.shuffle = false;
  o.augment = AugmentMode::none;
  DataLoader loader(folder, o);
  loader.start_epoch(0);
  Batch b;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loader.next(b));  // samples 0..5 decode
  try {
    loader.next(b);
    FAIL() << "expected an IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.png"), std::string::npos) << e.what();
  }
  EXPECT_THROW(loader.next(b), IOError);  // stays failed
  fs::remove_all(root);
}

TEST(DataLoader, OptionErrorsAndStats) {
  const ImageDataset ds = make_synthetic_dataset(20, 1, 4, 4, 3, 0);
  LoaderOptions o = loader_options(0, 2, 4);
  EXPECT_THROW(DataLoader(ds, o), ValueError);
  o = loader_options(2, 0, 4);
  EXPECT_THROW(DataLoader(ds, o), ValueError);
  o = loader_options(2, 2, 4);
  o.augment = AugmentMode::gpu;
  EXPECT_THROW(DataLoader(ds, o), ValueError);
  o.augment = AugmentMode::cpu;
  o.input_dtype = DType::bf16;
  EXPECT_THROW(DataLoader(ds, o), DTypeError);
  if (!built_with_cuda()) {
    o = loader_options(2, 2, 4);
    o.device = Device::cuda(0);
    EXPECT_THROW(DataLoader(ds, o), DeviceError);
  }
  o = loader_options(2, 2, 4);
  o.augment = AugmentMode::auto_;
  DataLoader loader(ds, o);
  EXPECT_EQ(loader.augment_mode(), AugmentMode::cpu);
  Batch b;
  EXPECT_THROW(loader.next(b), ValueError);  // no epoch started
  run_epoch(loader, 0);
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, 5);
  EXPECT_EQ(s.images, 20);
  ASSERT_EQ(s.worker_busy_seconds.size(), 2u);
  EXPECT_GT(s.worker_busy_seconds[0] + s.worker_busy_seconds[1], 0.0);
  EXPECT_GE(s.wait_seconds, 0.0);
  EXPECT_EQ(s.h2d_bytes, 0);
  loader.reset_stats();
  EXPECT_EQ(loader.stats().batches, 0);
  EXPECT_EQ(parse_augment_mode("gpu"), AugmentMode::gpu);
  EXPECT_THROW(parse_augment_mode("fast"), ValueError);
}

}  // namespace
}  // namespace liftoff
