// Generator state: copies, host draws vs kernel draws, and the capture guard (plain thread-local state, so it
// is exercised here without a GPU; the captured draws themselves are tested in random_cuda.cpp).
#include "runtime/random.h"

#include <gtest/gtest.h>

#include "runtime/capture.h"

namespace liftoff {
namespace {

// Marks this thread as capturing cuda:`device` for the scope (what CudaGraph does around a capture).
class FakeCapture {
 public:
  explicit FakeCapture(int device) { detail::set_capture_state(true, device); }
  ~FakeCapture() { detail::set_capture_state(false, -1); }
};

TEST(Generator, CopiesAreIndependentAtTheSamePosition) {
  Generator a(11);
  a.next_offset();
  Generator b = a;
  EXPECT_EQ(b.seed(), 11u);
  EXPECT_EQ(b.offset(), 1u);
  b.next_offset();
  EXPECT_EQ(a.offset(), 1u);  // b's draw did not move a
  a.set_state(5, 9);
  EXPECT_EQ(b.seed(), 11u);
  b = a;
  EXPECT_EQ(b.seed(), 5u);
  EXPECT_EQ(b.offset(), 9u);
  a.next_offset();
  EXPECT_EQ(b.offset(), 9u);
}

TEST(Generator, KernelDrawsOnTheCpuAreHostDrawsByValue) {
  Generator gen(42);
  gen.set_state(42, 7);
  const PhiloxDraw first = gen.next_draw(Device::cpu());
  EXPECT_EQ(first.seed, 42u);
  EXPECT_EQ(first.offset, 7u);
  EXPECT_EQ(first.device_state, nullptr);
  const PhiloxDraw second = gen.next_draw(Device::cpu());
  EXPECT_EQ(second.offset, 8u);
  EXPECT_EQ(gen.offset(), 9u);
  // A draw by value resolves to itself.
  EXPECT_EQ(second.resolve().seed, 42u);
  EXPECT_EQ(second.resolve().offset, 8u);
}

TEST(Generator, HostDrawsAreRefusedWhileCapturing) {
  Generator gen(3);
  {
    const FakeCapture capture(0);
    EXPECT_THROW(gen.next_offset(), GraphCaptureError);
    EXPECT_THROW(gen.next_draw(Device::cpu()), GraphCaptureError);  // a CPU kernel's draw is a host draw
    EXPECT_THROW(randn({4}, gen), GraphCaptureError);
  }
  EXPECT_EQ(gen.offset(), 0u);  // nothing was reserved
  EXPECT_EQ(gen.next_offset(), 0u);
}

TEST(Generator, KernelDrawsOutsideTheGraphsRecordingAreRefused) {
  Generator gen(3);
  // Capturing cuda:0 without a CapturedDraws recording (not through CudaGraph), and a draw for another
  // device than the one captured: neither could be replayed.
  const FakeCapture capture(0);
  for (int device : {0, 1}) {
    try {
      gen.next_draw(Device::cuda(device));
      ADD_FAILURE() << "no GraphCaptureError for cuda:" << device;
    } catch (const GraphCaptureError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot be replayed"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(gen.offset(), 0u);
}

TEST(CapturedDraws, AGraphWithoutDrawsHasNothingToWrite) {
  detail::CapturedDraws draws;
  draws.begin(0);
  draws.end();
  EXPECT_EQ(draws.generators(), 0u);
  EXPECT_NO_THROW(draws.before_replay(nullptr));  // no kernel to launch, no CUDA needed
}

}  // namespace
}  // namespace liftoff
