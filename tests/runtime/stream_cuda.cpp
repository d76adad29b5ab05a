// runtime/stream.h on a GPU (runtime/cuda/stream_cuda.cpp): events order streams and time device work,
// copies run on the stream they are queued on, the compute stream follows the active lane, and CPU events
// and CUDA streams do not mix.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/stream.h"
#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

constexpr int64_t kElements = 1 << 22;

// Enough device work on the compute stream that an event after it is still pending right away.
Tensor busy_work() {
  Tensor t = Tensor::empty({kElements}, DType::f32, Device::cuda(0));
  t.fill_(1.0);
  for (int i = 0; i < 20; ++i) accumulate_into(t, t);
  return t;
}

TEST(StreamCuda, EventTimesWorkOnTheComputeStream) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  const Stream compute = Stream::of(dev);
  Event start(dev, /*timing=*/true), end(dev, /*timing=*/true);
  EXPECT_TRUE(end.query());  // not recorded yet
  start.record(compute);
  Tensor t = busy_work();
  end.record(compute);
  EXPECT_TRUE(end.recorded());
  EXPECT_NE(end.native(), nullptr);
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_TRUE(start.query());
  EXPECT_GT(Event::elapsed_ms(start, end), 0.0);
  EXPECT_FLOAT_EQ(t.to_vector<float>()[0], 1048576.0f);  // 2^20
}

TEST(StreamCuda, CopiesOnTheCopyStreamWaitForTheComputeStream) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  const Stream compute = Stream::of(dev, StreamKind::compute);
  const Stream copy = Stream::of(dev, StreamKind::copy);
  EXPECT_NE(compute.native(), copy.native());
  Tensor t = busy_work();
  Event produced(dev);
  produced.record(compute);
  copy.wait(produced);  // without it the copy would read the buffer before the kernels finished
  const size_t bytes = sizeof(float) * static_cast<size_t>(kElements);
  std::shared_ptr<void> pinned = allocate_pinned_host(bytes);
  std::memset(pinned.get(), 0, bytes);
  copy_async(pinned.get(), t.raw_data(), bytes, CopyKind::device_to_host, copy);
  copy.synchronize();
  const float* host = static_cast<const float*>(pinned.get());
  EXPECT_FLOAT_EQ(host[0], 1048576.0f);
  EXPECT_FLOAT_EQ(host[kElements - 1], 1048576.0f);
}

TEST(StreamCuda, HostToDeviceAndBackThroughPinnedMemory) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  const Stream copy = Stream::of(dev, StreamKind::copy);
  const std::vector<int64_t> values = {5, -3, 7, 11};
  const size_t bytes = values.size() * sizeof(int64_t);
  std::shared_ptr<void> in = allocate_pinned_host(bytes), out = allocate_pinned_host(bytes);
  std::memcpy(in.get(), values.data(), bytes);
  Tensor staged = Tensor::empty({4}, DType::i64, dev);
  Tensor moved = Tensor::empty({4}, DType::i64, dev);
  copy_async(staged.raw_data(), in.get(), bytes, CopyKind::host_to_device, copy);
  copy_async(moved.raw_data(), staged.raw_data(), bytes, CopyKind::device_to_device, copy);
  copy_async(out.get(), moved.raw_data(), bytes, CopyKind::device_to_host, copy);
  Event done(dev);
  done.record(copy);
  done.synchronize();
  EXPECT_EQ(std::memcmp(out.get(), values.data(), bytes), 0);
}

TEST(StreamCuda, ComputeStreamFollowsTheActiveLane) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  prepare_lanes(dev, 2);
  const Stream compute = Stream::of(dev);  // resolved at each use
  const Stream lane0 = Stream::lane(dev, 0), lane1 = Stream::lane(dev, 1);
  EXPECT_EQ(compute.native(), lane0.native());
  const Stream fixed = compute.resolved();
  set_active_lane(dev, 1);
  EXPECT_EQ(compute.native(), lane1.native());
  EXPECT_EQ(fixed.native(), lane0.native());  // resolved before the switch
  set_active_lane(dev, 0);
  EXPECT_EQ(compute.native(), lane0.native());
  EXPECT_EQ(lane1.lane_index(), 1);
}

TEST(StreamCuda, RecordNodeOutsideACaptureIsARecord) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  Event e(dev, true);
  e.record_node(Stream::of(dev));
  e.synchronize();
  EXPECT_TRUE(e.query());
  Event graph(dev, true);
  EXPECT_EQ(graph.record_by_graph(), graph.native());
  EXPECT_TRUE(graph.recorded());
}

TEST(StreamCuda, CpuEventsAndCudaStreamsDoNotMix) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  Event cpu_event;
  EXPECT_THROW(cpu_event.record(Stream::of(dev)), ValueError);
  Event cuda_event(dev);
  EXPECT_THROW(cuda_event.record(Stream::cpu()), ValueError);
  cuda_event.record(Stream::of(dev));
  EXPECT_THROW(Stream::cpu().wait(cuda_event), ValueError);
  EXPECT_THROW(Event::elapsed_ms(cpu_event, cuda_event), ValueError);
  cpu_event.record(Stream::cpu());
  Stream::of(dev).wait(cpu_event);  // CPU work is done already: nothing to wait for
}

TEST(StreamCuda, MovedEventsKeepTheirCudaEvent) {
  LIFTOFF_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  std::vector<Event> pool;
  pool.emplace_back(dev, true);
  void* first = pool[0].native();
  for (int i = 0; i < 32; ++i) pool.emplace_back(dev, true);  // reallocation moves the events
  EXPECT_EQ(pool[0].native(), first);
  pool[0].record(Stream::of(dev));
  pool[1].record(Stream::of(dev));
  pool[1].synchronize();
  EXPECT_GE(Event::elapsed_ms(pool[0], pool[1]), 0.0);
}

}  // namespace
}  // namespace liftoff
