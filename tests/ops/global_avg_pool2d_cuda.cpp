#include <gtest/gtest.h>

#include "ops/global_avg_pool2d/global_avg_pool2d.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

void check(const Shape& shape, DType dtype, double tol) {
  const Tensor x = testing::random_tensor(shape, 7, -1, 1, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = tol;
  options.rtol = tol;
  options.cuda_dtype = dtype;
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); },
                                   {x}, options))
      << shape_str(shape) << " " << dtype_name(dtype);
}

TEST(GlobalAvgPool2dCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // Planes smaller than, equal to and larger than a warp; more planes than one launch wave; planes long
  // enough to split over blocks.
  for (const Shape& shape : {Shape{3, 5, 4, 5}, Shape{2, 3, 1, 1}, Shape{16, 64, 7, 7}, Shape{4, 8, 32, 32},
                             Shape{2, 3, 160, 160}}) {
    check(shape, DType::f32, 1e-5);
    check(shape, DType::f64, 1e-5);  // the CPU reference is f32
  }
}

TEST(GlobalAvgPool2dCuda, MatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  check({16, 64, 7, 7}, DType::bf16, 1e-2);
  check({16, 64, 7, 7}, DType::f16, 2e-3);
}

}  // namespace
}  // namespace liftoff
