// The runtime's layout choice on the CPU: its kernels are NCHW, so convolutions (and with them a whole conv
// net) compute NCHW with or without autocast. The old per-model switch is gone from the settings table.
#include <gtest/gtest.h>

#include "models/nn/layers.h"
#include "ops/conv2d/conv2d.h"
#include "runtime/autocast.h"
#include "runtime/config.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(RuntimeLayout, CpuConvolutionsStayNchw) {
  const Tensor x = testing::random_tensor({2, 3, 8, 8}, 5, -1, 1, DType::f32);
  const Tensor x_cl = x.contiguous(MemoryFormat::channels_last);
  EXPECT_EQ(conv2d_memory_format(x), MemoryFormat::contiguous);
  EXPECT_EQ(conv2d_memory_format(x_cl), MemoryFormat::contiguous);
  {
    AutocastGuard autocast(DType::bf16);
    EXPECT_EQ(conv2d_memory_format(x), MemoryFormat::contiguous);
    EXPECT_EQ(conv2d_memory_format(x_cl), MemoryFormat::contiguous);
  }
  // A channels-last CPU input is computed NCHW (same values as the NCHW input), its output contiguous.
  Generator gen(3);
  Conv2d conv(3, 4, 3, 1, 1, false, gen);
  const Tensor y = conv.forward(x_cl);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_TRUE(testing::all_close(y, conv.forward(x), 0, 0));
}

TEST(RuntimeLayout, NoModelSwitchesInTheSettingsTable) {
  EXPECT_FALSE(config::find("LIFTOFF_CHANNELS_LAST").has_value());
  EXPECT_FALSE(config::find("LIFTOFF_FUSED_BN_RELU").has_value());
}

}  // namespace
}  // namespace liftoff
