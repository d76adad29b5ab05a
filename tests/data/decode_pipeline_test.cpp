// The concurrency of DecodeLoader's host side: the staging pool several workers write at once, workers
// sharing the files of one batch (one slot, many workers) with the same result as one worker, an epoch
// restarted mid-way, and the error policy naming the first bad file of a batch whatever the worker timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/decode/decode_loader.h"
#include "data/decode/decode_loader_internal.h"
#include "decode_test_util.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

using namespace decode_test;

std::shared_ptr<void> counted_allocate(size_t bytes, int* count) {
  ++*count;
  return std::shared_ptr<void>(new uint8_t[bytes], std::default_delete<uint8_t[]>());
}

TEST(StagingPool, ConcurrentReservationsFormOneLayoutWithoutOverlap) {
  decode_detail::StagingPool pool;
  int allocations = 0;
  pool.set_allocator([&](size_t n) { return counted_allocate(n, &allocations); });
  for (int round = 0; round < 2; ++round) {
    pool.reset();
    std::vector<std::vector<decode_detail::StagingPool::Region>> regions(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          // Mostly small regions, and one larger than a chunk per thread.
          const size_t n = i == 100 ? (size_t{9} << 20) : 1000 + 37 * static_cast<size_t>(i + t);
          const auto region = pool.reserve(n);
          std::memset(region.data, t * 50 + 1, n);
          regions[static_cast<size_t>(t)].push_back(region);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    // The used chunks tile [0, total) in order, and every region lies inside one of them.
    size_t expected_start = 0;
    std::vector<const decode_detail::StagingPool::Chunk*> chunks = pool.used_chunks();
    for (const auto* chunk : chunks) {
      EXPECT_EQ(chunk->start, expected_start);
      expected_start += chunk->used;
    }
    EXPECT_EQ(expected_start, pool.total());
    std::set<size_t> starts;
    for (int t = 0; t < 4; ++t) {
      for (size_t i = 0; i < regions[static_cast<size_t>(t)].size(); ++i) {
        const auto& r = regions[static_cast<size_t>(t)][i];
        EXPECT_TRUE(starts.insert(r.at).second) << "two regions at " << r.at;
        const auto* home = *std::find_if(chunks.begin(), chunks.end(), [&](const auto* c) {
          return r.at >= c->start && r.at < c->start + c->used;
        });
        EXPECT_EQ(r.data, home->data() + (r.at - home->start));
        EXPECT_EQ(r.data[0], static_cast<uint8_t>(t * 50 + 1)) << "overwritten by another thread";
      }
    }
  }
  const int first_round = allocations;
  EXPECT_GT(first_round, 4);  // the four large regions got chunks of their own
  pool.reset();
  pool.reserve(1000);
  EXPECT_EQ(allocations, first_round) << "chunks are kept for the next batch";
}

class DecodePipelineTest : public TempDirTest {
 protected:
  // 13 JPEGs of different sizes in two classes.
  std::shared_ptr<const ImageFolder> make_folder(int files = 13) {
    for (int i = 0; i < files; ++i) {
      const std::string file = str_cat(i % 2 == 0 ? "a/" : "b/", i < 10 ? "0" : "", i, ".jpg");
      fs::create_directories((dir_ / file).parent_path());
      const int64_t h = 24 + 3 * i, w = 40 - i;
      write_image_file(path(file), picture(h, w, i).data(), 3, h, w, ImageFormat::jpg, 90);
    }
    return std::make_shared<const ImageFolder>(dir_.string());
  }
  static DecodeLoaderOptions options(int workers, int prefetch) {
    DecodeLoaderOptions o;
    o.batch = 5;
    o.workers = workers;
    o.prefetch = prefetch;
    o.shuffle = true;
    o.crop.out_height = 12;
    o.crop.out_width = 14;
    o.seed = 23;
    return o;
  }
  static std::vector<Batch> take(DecodeLoader& loader, int64_t epoch, int64_t limit = -1) {
    loader.start_epoch(epoch);
    std::vector<Batch> out;
    Batch b;
    while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && loader.next(b)) out.push_back(b);
    return out;
  }
  static void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].indices, b[k].indices) << what << " batch " << k;
      EXPECT_EQ(a[k].labels.to_vector<int64_t>(), b[k].labels.to_vector<int64_t>()) << what;
      ASSERT_EQ(a[k].input.shape(), b[k].input.shape()) << what;
      const Tensor x = a[k].input.contiguous(), y = b[k].input.contiguous();
      EXPECT_EQ(std::memcmp(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()) * sizeof(float)),
                0)
          << what << " batch " << k << ": pixels differ";
    }
  }
};

TEST_F(DecodePipelineTest, WorkersSharingOneBatchGiveWhatOneWorkerGives) {
  const auto folder = make_folder();
  DecodeLoader one(folder, options(1, 1));
  DecodeLoader shared(folder, options(8, 1));  // one slot: the eight workers must share its files
  DecodeLoader wide(folder, options(6, 4));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<Batch> reference = take(one, epoch);
    ASSERT_EQ(reference.size(), 3u);
    expect_same(take(shared, epoch), reference, "8 workers, 1 slot, epoch " + std::to_string(epoch));
    expect_same(take(wide, epoch), reference, "6 workers, 4 slots, epoch " + std::to_string(epoch));
  }
  const LoaderStats stats = shared.stats();
  EXPECT_EQ(stats.images, 3 * 13);
  int busy_workers = 0;
  for (const double s : stats.worker_busy_seconds) busy_workers += s > 0.0 ? 1 : 0;
  EXPECT_GT(busy_workers, 1) << "the files of a batch were not shared";
}

TEST_F(DecodePipelineTest, AnEpochRestartedMidwayDropsTheOldBatches) {
  const auto folder = make_folder();
  DecodeLoader loader(folder, options(4, 3));
  DecodeLoader fresh(folder, options(2, 2));
  for (int round = 0; round < 3; ++round) {
    take(loader, 4, 1);  // one batch of epoch 4, the others in flight
    expect_same(take(loader, 5), take(fresh, 5), "restarted, round " + std::to_string(round));
  }
}

TEST_F(DecodePipelineTest, TheErrorNamesTheFirstBadFileOfItsBatch) {
  make_folder(4);
  write_bytes(path("a/90-corrupt.jpg"), Bytes{0xFF, 0xD8, 0xFF, 0x00, 'x'});
  write_bytes(path("b/91-not-an-image.jpg"), Bytes{'n', 'o', 'p', 'e'});
  const auto folder = std::make_shared<const ImageFolder>(dir_.string());
  for (const int workers : {1, 3, 8}) {
    DecodeLoaderOptions o = options(workers, 2);
    o.shuffle = false;
    o.batch = 6;
    DecodeLoader loader(folder, o);
    loader.start_epoch(0);
    Batch b;
    try {
      loader.next(b);
      FAIL() << "the batch holds two bad files";
    } catch (const IOError& e) {
      // Sorted by class then name: a/00, a/02, a/90-corrupt, b/01, b/03, b/91-not-an-image.
      EXPECT_NE(std::string(e.what()).find("90-corrupt.jpg"), std::string::npos)
          << workers << ": " << e.what();
    }
  }
}

TEST_F(DecodePipelineTest, PipelineOptionsAreChecked) {
  const auto folder = make_folder(2);
  DecodeLoaderOptions o = options(1, 1);
  o.decode_lanes = 0;
  EXPECT_THROW(DecodeLoader(folder, o), ValueError);
  o = options(1, 1);
  o.hardware_share = 1.5;
  EXPECT_THROW(DecodeLoader(folder, o), ValueError);
  o = options(1, 1);
  o.hardware_batch = -2;
  EXPECT_THROW(DecodeLoader(folder, o), ValueError);
}

}  // namespace
}  // namespace liftoff
