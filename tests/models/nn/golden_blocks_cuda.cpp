// The golden blocks of golden_blocks_test.cpp on CUDA in f32 against the same f64 PyTorch dumps, with the
// per-block tolerances of golden_blocks.h (looser where cuDNN convolutions may use TF32).
#include <gtest/gtest.h>

#include "tests/common/cuda_test.h"
#include "tests/models/nn/golden_blocks.h"

namespace liftoff {
namespace {

using testing::GoldenBlock;

class GoldenBlocksCuda : public ::testing::TestWithParam<GoldenBlock> {};

TEST_P(GoldenBlocksCuda, TrainingStepMatchesPyTorchInF32) {
  LIFTOFF_REQUIRE_CUDA();
  testing::expect_step_matches_golden(GetParam(), Device::cuda(), DType::f32, GetParam().cuda);
}

INSTANTIATE_TEST_SUITE_P(PyTorch, GoldenBlocksCuda, ::testing::ValuesIn(testing::golden_blocks()),
                         [](const ::testing::TestParamInfo<GoldenBlock>& info) { return info.param.name; });

}  // namespace
}  // namespace liftoff
