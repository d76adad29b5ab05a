// runtime/stream.h on the CPU: host-clock events (timing order, query after record, elapsed time >= 0),
// the synchronous CPU stream, copies, and the "built without CUDA" answers of a CPU-only build.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/stream.h"

namespace liftoff {
namespace {

TEST(StreamCpu, StreamsOfTheCpuAreTheOneSynchronousStream) {
  for (StreamKind kind : {StreamKind::compute, StreamKind::copy, StreamKind::comm}) {
    const Stream s = Stream::of(Device::cpu(), kind);
    EXPECT_TRUE(s.is_cpu());
    EXPECT_EQ(s.native(), nullptr);
    s.synchronize();  // nothing queued: returns at once
  }
  EXPECT_TRUE(Stream::lane(Device::cpu(), 3).is_cpu());
  EXPECT_TRUE(Stream::of(Device::cpu()).resolved().is_cpu());
  EXPECT_STREQ(stream_name(StreamKind::compute), "compute");
  EXPECT_STREQ(stream_name(StreamKind::copy), "copy");
  EXPECT_STREQ(stream_name(StreamKind::comm), "comm");
}

TEST(StreamCpu, EventIsCompleteBeforeAndAfterRecord) {
  Event e;
  EXPECT_FALSE(e.recorded());
  EXPECT_TRUE(e.query());  // nothing recorded: nothing to wait for
  e.record(Stream::cpu());
  EXPECT_TRUE(e.recorded());
  EXPECT_TRUE(e.query());  // CPU work is done when its call returns
  e.synchronize();
  e.wait(Stream::cpu());
  EXPECT_EQ(e.native(), nullptr);
  EXPECT_TRUE(e.device().is_cpu());
}

TEST(StreamCpu, ElapsedTimeFollowsRecordOrder) {
  Event start(Device::cpu(), /*timing=*/true), middle, end;
  start.record(Stream::cpu());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  middle.record(Stream::cpu());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  end.record(Stream::cpu());
  const double first = Event::elapsed_ms(start, middle);
  const double total = Event::elapsed_ms(start, end);
  EXPECT_GE(first, 3.0 - 0.5);  // sleep_for sleeps at least as long; allow clock granularity
  EXPECT_GE(total, first + 3.0 - 0.5);
  EXPECT_LE(Event::elapsed_ms(end, start), 0.0);  // reversed order gives the negative span
  EXPECT_DOUBLE_EQ(Event::elapsed_ms(middle, middle), 0.0);
}

TEST(StreamCpu, ReRecordingMovesTheTimestamp) {
  Event a, b;
  a.record(Stream::cpu());
  b.record(Stream::cpu());
  const double before = Event::elapsed_ms(a, b);
  EXPECT_GE(before, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  a.record(Stream::cpu());  // now after b
  EXPECT_LT(Event::elapsed_ms(a, b), 0.0);
}

TEST(StreamCpu, ElapsedNeedsBothEventsRecorded) {
  Event recorded, never;
  recorded.record(Stream::cpu());
  try {
    Event::elapsed_ms(recorded, never);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("recorded"), std::string::npos) << e.what();
  }
}

TEST(StreamCpu, MovedEventKeepsItsRecordAndLeavesAnEmptyOne) {
  Event a;
  Event reference;
  reference.record(Stream::cpu());
  a.record(Stream::cpu());
  Event b(std::move(a));
  EXPECT_TRUE(b.recorded());
  EXPECT_FALSE(a.recorded());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_GE(Event::elapsed_ms(reference, b), 0.0);
  Event c;
  c = std::move(b);
  EXPECT_TRUE(c.recorded());
  EXPECT_GE(Event::elapsed_ms(reference, c), 0.0);
}

TEST(StreamCpu, EventsPoolInAVectorThatGrows) {
  // The profiler keeps its events in a growing vector: moves on reallocation must keep each event's record.
  std::vector<Event> pool;
  pool.emplace_back(Device::cpu(), true);
  pool[0].record(Stream::cpu());
  for (int i = 0; i < 64; ++i) pool.emplace_back(Device::cpu(), true);
  EXPECT_TRUE(pool[0].recorded());
  pool.back().record(Stream::cpu());
  EXPECT_GE(Event::elapsed_ms(pool[0], pool.back()), 0.0);
}

TEST(StreamCpu, RecordByGraphCountsAsRecorded) {
  Event e;
  EXPECT_EQ(e.record_by_graph(), nullptr);
  EXPECT_TRUE(e.recorded());
  e.record_node(Stream::cpu());  // outside a capture: a plain record
  EXPECT_TRUE(e.query());
}

TEST(StreamCpu, CopyAsyncOnTheCpuStreamCopiesAtOnce) {
  const std::vector<int> src = {1, 2, 3, 4, 5};
  std::vector<int> dst(5, 0);
  copy_async(dst.data(), src.data(), src.size() * sizeof(int), CopyKind::host_to_host, Stream::cpu());
  EXPECT_EQ(dst, src);
  copy_async(dst.data(), src.data(), 0, CopyKind::host_to_host, Stream::cpu());  // empty: fine
}

TEST(StreamCpu, CopyAsyncToADeviceOnTheCpuStreamIsAnError) {
  int a = 0, b = 1;
  try {
    copy_async(&a, &b, sizeof(int), CopyKind::host_to_device, Stream::cpu());
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("host to host"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a, 0);
}

TEST(StreamCpu, LanesAreNoOpsOnTheCpu) {
  prepare_lanes(Device::cpu(), 4);
  set_active_lane(Device::cpu(), 2);
  EXPECT_TRUE(Stream::of(Device::cpu()).is_cpu());
  set_active_lane(Device::cpu(), 0);
}

TEST(StreamCpu, CudaStreamsAndEventsSayBuiltWithoutCuda) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has the CUDA backend (stream_cuda.cpp tests it)";
  const auto expect_no_cuda = [](auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
  };
  expect_no_cuda([] { Stream::of(Device::cuda(0), StreamKind::copy); });
  expect_no_cuda([] { Stream::of(Device::cuda(0)); });
  expect_no_cuda([] { Stream::lane(Device::cuda(0), 1); });
  expect_no_cuda([] { Event e(Device::cuda(0), true); });
  expect_no_cuda([] { prepare_lanes(Device::cuda(0), 2); });
  expect_no_cuda([] { allocate_pinned_host(64); });
}

}  // namespace
}  // namespace liftoff
