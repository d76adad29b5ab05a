#include <gtest/gtest.h>

#include "ops/pad/pad.h"
#include "ops/views/views.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

const DType kAllFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

testing::ParityOptions tolerance(DType dtype) {
  testing::ParityOptions o;
  o.cuda_dtype = dtype;
  if (dtype == DType::f16 || dtype == DType::bf16) o.atol = o.rtol = 3e-2;
  return o;
}

TEST(PadCuda, EveryModeEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 3, 5, 6}, 1, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dtype : kAllFloats) {
    for (const char* mode : {"constant", "reflect", "replicate"}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + mode);
      EXPECT_TRUE(testing::cuda_parity(
          [mode](const std::vector<Tensor>& in) {
            return pad(in[0], {2, 3, 4, 1}, mode, 0.25);
          },
          {x}, tolerance(dtype)));
      EXPECT_TRUE(testing::cuda_parity(
          [mode](const std::vector<Tensor>& in) {
            return pad(transpose(in[0], 1, 3), {1, 2, 0, 2, 1, 1}, mode);
          },
          {x}, tolerance(dtype)));
    }
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return pad(in[0], {-1, 2, 1, -2});
        },
        {x}, tolerance(dtype)));
  }
}

TEST(PadCuda, ChannelsLastStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 3, 4, 5}, 2, -1, 1, DType::f32);
  const Tensor out =
      pad(x.to(Device::cuda(0)).contiguous(MemoryFormat::channels_last), {1, 1, 2, 2}, "reflect");
  EXPECT_TRUE(out.is_channels_last());
  EXPECT_TRUE(testing::all_close(out.to(Device::cpu()), pad(x, {1, 1, 2, 2}, "reflect"), 0, 0));
}

}  // namespace
}  // namespace liftoff
