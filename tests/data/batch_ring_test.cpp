// BatchRing (data/batch_ring.h), the slot ring both loaders use: batches reach the consumer in order whatever
// the producers' timing, a new epoch drops the old generation's work (also work still in progress), errors
// stay with their batch; and epoch_sample_order's shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/batch_ring.h"

namespace liftoff {
namespace {

struct TestSlot : RingSlot {
  int64_t value = -1;  // the payload: batch * 10 + epoch
};

// Producers that fill each claimed batch after a random pause, so they finish out of order.
class Producers {
 public:
  Producers(BatchRing<TestSlot>& ring, int count, int64_t fail_batch = -1) : ring_(ring) {
    for (int p = 0; p < count; ++p) threads_.emplace_back([this, p, fail_batch] { run(p, fail_batch); });
  }
  ~Producers() {
    ring_.stop();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void run(int p, int64_t fail_batch) {
    std::mt19937 rng(static_cast<unsigned>(p));
    std::unique_lock<std::mutex> lock(ring_.mutex());
    while (true) {
      ring_.work_cv.wait(lock, [&] { return ring_.stopped() || ring_.claimable(); });
      if (ring_.stopped()) return;
      TestSlot& slot = ring_.claim();
      const int64_t batch = slot.batch, epoch = slot.epoch;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
      slot.value = batch * 10 + epoch;
      std::exception_ptr error;
      if (batch == fail_batch) error = std::make_exception_ptr(std::runtime_error("batch failed"));
      lock.lock();
      ring_.hand_on(slot, RingSlot::State::ready, error);
    }
  }
  BatchRing<TestSlot>& ring_;
  std::vector<std::thread> threads_;
};

std::vector<int64_t> consume_all(BatchRing<TestSlot>& ring, int64_t limit = -1) {
  std::vector<int64_t> values;
  double waited = 0.0;
  while (limit < 0 || static_cast<int64_t>(values.size()) < limit) {
    TestSlot* slot = ring.wait_ready(&waited);
    if (slot == nullptr) break;
    values.push_back(slot->value);
    ring.consume(*slot);
  }
  return values;
}

TEST(BatchRing, BatchesComeInOrderWhateverTheProducersTiming) {
  BatchRing<TestSlot> ring(3);
  Producers producers(ring, 4);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    ring.start_epoch(epoch, 25, [] {});
    const std::vector<int64_t> values = consume_all(ring);
    ASSERT_EQ(values.size(), 25u);
    for (int64_t b = 0; b < 25; ++b) EXPECT_EQ(values[static_cast<size_t>(b)], b * 10 + epoch);
  }
}

TEST(BatchRing, ANewEpochDropsTheOldGenerationsWork) {
  BatchRing<TestSlot> ring(4);
  Producers producers(ring, 3);
  ring.start_epoch(0, 40, [] {});
  EXPECT_EQ(consume_all(ring, 2), (std::vector<int64_t>{0, 10}));
  // Batches 2.. of epoch 0 are in flight or finished: none of them may reach epoch 1's consumer.
  bool rewound = false;
  ring.start_epoch(1, 6, [&] { rewound = true; });
  EXPECT_TRUE(rewound);
  const std::vector<int64_t> values = consume_all(ring);
  EXPECT_EQ(values, (std::vector<int64_t>{1, 11, 21, 31, 41, 51}));
}

TEST(BatchRing, AnErrorStaysWithItsBatchAndIsRethrownOnRetry) {
  BatchRing<TestSlot> ring(2);
  Producers producers(ring, 2, /*fail_batch=*/1);
  ring.start_epoch(0, 4, [] {});
  double waited = 0.0;
  TestSlot* first = ring.wait_ready(&waited);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->value, 0);
  ring.consume(*first);
  EXPECT_THROW(ring.wait_ready(&waited), std::runtime_error);
  EXPECT_THROW(ring.wait_ready(&waited), std::runtime_error);  // the batch stays
  EXPECT_GE(waited, 0.0);
}

// A consumer waiting longer than the watch's period gets the ring's state (and the loader's details) printed,
// again each period it keeps waiting, and still receives its batch once it comes.
TEST(BatchRing, AStalledWaitReportsTheRingsState) {
  BatchRing<TestSlot> ring(2);
  ring.start_epoch(3, 4, [] {});
  TestSlot* claimed = nullptr;
  {
    std::lock_guard<std::mutex> lock(ring.mutex());
    claimed = &ring.claim();  // batch 0: filling, never handed on until the producer below does
  }
  int reports = 0;
  StallWatch watch;
  watch.period_seconds = 0.05;
  watch.details = [&] {
    ++reports;
    return std::string("details of the loader");
  };
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(180));
    std::lock_guard<std::mutex> lock(ring.mutex());
    claimed->value = 3;
    ring.hand_on(*claimed, RingSlot::State::ready, nullptr);
  });
  ::testing::internal::CaptureStderr();
  double waited = 0.0;
  TestSlot* slot = ring.wait_ready(&waited, watch);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  producer.join();
  ASSERT_EQ(slot, claimed);
  EXPECT_EQ(slot->value, 3);
  EXPECT_GE(reports, 2) << printed;  // 0.05, 0.10, 0.15 s: at least two before 0.18 s on a busy machine
  EXPECT_NE(printed.find(
                "liftoff loader: waited 0.05 s for a batch; epoch 3 (generation 1): consumer at batch 0 of 4"
                ", next claim 1; slots: [0] filling b0 [1] free"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("details of the loader"), std::string::npos) << printed;
  {
    std::lock_guard<std::mutex> lock(ring.mutex());
    EXPECT_EQ(ring.describe_locked(),
              "epoch 3 (generation 1): consumer at batch 0 of 4, next claim 1; slots: [0] ready b0 [1] free");
  }
}

TEST(BatchRing, EpochSampleOrderShardsCoverThePermutation) {
  const int64_t size = 10;
  const std::vector<int64_t> all = epoch_sample_order(size, size, true, 5, 2, 0, 1, true);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 10u);
  EXPECT_NE(all, epoch_sample_order(size, size, true, 5, 3, 0, 1, true)) << "epochs differ";
  // 3 ranks, even shards: ceil(10 / 3) = 4 each, padded from the start of the same permutation.
  std::vector<int64_t> joined;
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<int64_t> shard = epoch_sample_order(size, 4, true, 5, 2, rank, 3, true);
    ASSERT_EQ(shard.size(), 4u);
    for (size_t i = 0; i < shard.size(); ++i) EXPECT_EQ(shard[i], all[(i * 3 + rank) % all.size()]);
    joined.insert(joined.end(), shard.begin(), shard.end());
  }
  EXPECT_EQ(std::set<int64_t>(joined.begin(), joined.end()).size(), 10u);
  // Exact shards: rank 2 of 3 gets positions 2, 5, 8.
  EXPECT_EQ(epoch_sample_order(size, 3, false, 5, 0, 2, 3, false), (std::vector<int64_t>{2, 5, 8}));
}

}  // namespace
}  // namespace liftoff
