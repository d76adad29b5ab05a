// cuda::Event on machines with two GPUs: a rank on cuda:1 whose thread's current device is still 0 (the bug
// that hung `train --gpus 2`: cudaEventRecord failed with "invalid resource handle" on rank 1).
#include <gtest/gtest.h>

#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/context.h"
#include "runtime/cuda/event.h"
#endif

namespace liftoff::cuda {
namespace {

#if LIFTOFF_WITH_CUDA

TEST(EventCuda, RecordsOnAStreamOfAnotherDeviceThanTheCurrentOne) {
  LIFTOFF_REQUIRE_CUDA();
  if (device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs (found " << device_count() << ")";
  DeviceGuard on_zero(0);
  Event start(true), end(true);  // made while cuda:0 is current
  start.record(compute_stream(1));
  end.record(compute_stream(1));
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(Event::elapsed_ms(start, end), 0.0f);
  end.wait(compute_stream(0));  // a wait across devices stays legal
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "record() must not change the caller's current device";
}

TEST(EventCuda, RecordOnTheCurrentDeviceKeepsTheEvent) {
  LIFTOFF_REQUIRE_CUDA();
  DeviceGuard on_zero(0);
  Event e;
  const cudaEvent_t before = e.get();
  e.record(compute_stream(0));
  EXPECT_EQ(e.get(), before);
  e.synchronize();
  EXPECT_TRUE(e.query());
}

#else
TEST(EventCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff::cuda
