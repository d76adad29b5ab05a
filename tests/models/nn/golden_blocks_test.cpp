// A transformer encoder block (pre-norm GELU as vit_tiny stacks it, and PyTorch's post-norm ReLU default) and
// two MobileNetV2 inverted-residual blocks against PyTorch: tools/reference/golden_blocks.py wrote the
// initial state, the input, and the output, loss, gradients (parameters and input) and running statistics of
// one training-mode step in torch 1.13, in f64. In f64 the two sides differ by rounding only (1e-10 leaves
// room for any summation order); the f32 CPU run is held to what single precision allows.
#include <gtest/gtest.h>

#include "tests/models/nn/golden_blocks.h"

namespace liftoff {
namespace {

using testing::GoldenBlock;
using testing::GoldenTolerances;

class GoldenBlocks : public ::testing::TestWithParam<GoldenBlock> {};

TEST_P(GoldenBlocks, StateDictNamesShapesAndOrderMatchPyTorch) {
  const testing::GoldenDump golden(GetParam().file);
  Generator gen(7);
  const StateDict ours = GetParam().build(gen)->state_dict();
  ASSERT_EQ(ours.size(), golden.initial_state.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].first, golden.initial_state[i].first);
    EXPECT_EQ(ours[i].second.shape(), golden.initial_state[i].second.shape()) << ours[i].first;
  }
}

TEST_P(GoldenBlocks, TrainingStepMatchesPyTorchInF64) {
  testing::expect_step_matches_golden(GetParam(), Device::cpu(), DType::f64,
                                      GoldenTolerances{1e-10, 1e-10, 1e-10, 1e-10});
}

TEST_P(GoldenBlocks, TrainingStepMatchesPyTorchInF32) {
  testing::expect_step_matches_golden(GetParam(), Device::cpu(), DType::f32,
                                      GoldenTolerances{1e-5, 1e-5, 1e-4, 1e-5});
}

INSTANTIATE_TEST_SUITE_P(PyTorch, GoldenBlocks, ::testing::ValuesIn(testing::golden_blocks()),
                         [](const ::testing::TestParamInfo<GoldenBlock>& info) { return info.param.name; });

}  // namespace
}  // namespace liftoff
