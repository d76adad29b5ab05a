#include "runtime/device_select.h"

#include <gtest/gtest.h>

#include "runtime/error.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

TEST(DeviceSelect, CpuIsAlwaysUsable) { EXPECT_EQ(resolve_device("cpu").device, Device::cpu()); }

TEST(DeviceSelect, AutoFallsBackToCpuWithAReason) {
  const std::string reason = cuda_unavailable_reason(0);
  const DeviceChoice choice = resolve_device("auto");
  if (reason.empty()) {
    EXPECT_TRUE(choice.device.is_cuda());
  } else {
    EXPECT_TRUE(choice.device.is_cpu());
    EXPECT_NE(choice.why.find(reason), std::string::npos) << choice.why;
  }
}

TEST(DeviceSelect, UnusableCudaIsAClearError) {
  const std::string reason = cuda_unavailable_reason(0);
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is usable here; this test covers machines without one";
  try {
    resolve_device("cuda");
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda cannot be used"), std::string::npos) << e.what();
  }
}

TEST(DeviceSelect, IndexOutOfRangeIsNamed) {
  const std::string reason = cuda_unavailable_reason(999);
  EXPECT_FALSE(reason.empty());
  if (testing::cuda_unavailable_reason().empty()) {
    EXPECT_NE(reason.find("cuda:999 does not exist"), std::string::npos) << reason;
  }
}

TEST(DeviceSelect, BadSpellingIsAValueError) { EXPECT_THROW(resolve_device("gpu0"), ValueError); }

}  // namespace
}  // namespace liftoff
