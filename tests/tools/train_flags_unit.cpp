// train's flag defaults that depend on the machine (tools/train/flags.h), compiled into test_tools when the
// tools are built.
#include <gtest/gtest.h>

#include "tools/train/flags.h"

namespace liftoff::tools {
namespace {

// --workers 0: decoding workers for a CUDA run get half the cores (4 to 8, a rank's share), everything
// else 4.
TEST(TrainFlags, DefaultWorkersFollowTheCoresOnlyForDecodedFoldersOnCuda) {
  Flags f;
  f.data = "folder";
  f.decode = "auto";
  EXPECT_EQ(default_workers(f, 16, 1, true), 8);  // an H100 host: 8 kept ResNet-50 at 98.6% of on-GPU data
  EXPECT_EQ(default_workers(f, 64, 1, true), 8);  // at most 8
  EXPECT_EQ(default_workers(f, 12, 1, true), 6);
  EXPECT_EQ(default_workers(f, 2, 1, true), 4);    // at least 4 (today's default)
  EXPECT_EQ(default_workers(f, 32, 4, true), 4);   // four ranks share 32 cores: 8 each, half of that
  EXPECT_EQ(default_workers(f, 16, 1, false), 4);  // a CPU run: the model's threads need the cores
  f.decode = "cpu";
  EXPECT_EQ(default_workers(f, 16, 1, true), 8);
  f.decode = "gpu";  // nvJPEG decodes: the workers only read files
  EXPECT_EQ(default_workers(f, 16, 1, true), 4);
  f.decode = "off";
  EXPECT_EQ(default_workers(f, 16, 1, true), 4);
  f.data = "fashion-mnist";
  f.decode = "auto";
  EXPECT_EQ(default_workers(f, 16, 1, true), 4);
}

}  // namespace
}  // namespace liftoff::tools
