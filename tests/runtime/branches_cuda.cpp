// ConcurrentBranches on a GPU: lanes are real streams, shared state is updated in branch order even when an
// earlier branch reaches it late, and a captured graph replays the branches with the same result.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/branches.h"
#include "runtime/graph.h"
#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/context.h"
#endif

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

constexpr int64_t kElements = 1 << 22;

// Branch k: (k == 0) a long detour first, then total = 2 * total + (k + 1), ordered through shared state.
// Without the ordering, the later branches would update `total` before branch 0 and the result would differ.
void queue_branches(ConcurrentBranches& branches, const Tensor& total, const Tensor& scratch,
                    std::vector<Tensor>& steps) {
  for (int k = 0; k < 4; ++k) {
    branches.enter(k);
    EXPECT_EQ(cuda::compute_stream(0), cuda::lane_stream(0, k % branches.lanes()));
    if (k == 0) {
      for (int i = 0; i < 40; ++i) accumulate_into(scratch, scratch);
    }
    Tensor step = Tensor::empty({kElements}, DType::f32, Device::cuda(0));  // from the lane's cache
    step.fill_(k + 1);
    order_shared_state(total.raw_data());
    accumulate_into(total, total);
    accumulate_into(total, step);
    record_shared_state(total.raw_data());
    steps.push_back(step);
  }
  branches.join();
  EXPECT_EQ(cuda::compute_stream(0), cuda::lane_stream(0, 0));
}

void expect_all(const Tensor& t, float value) {
  const Tensor host = t.to(Device::cpu());
  const float* p = static_cast<const float*>(host.raw_data());
  int64_t wrong = 0;
  for (int64_t i = 0; i < host.numel(); ++i) wrong += p[i] != value;
  EXPECT_EQ(wrong, 0) << "first element " << p[0] << ", expected " << value;
}

TEST(ConcurrentBranchesCuda, SharedStateIsUpdatedInBranchOrder) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor total = Tensor::zeros({kElements}, DType::f32, cuda);
  const Tensor scratch = Tensor::zeros({kElements}, DType::f32, cuda);
  std::vector<Tensor> steps;
  {
    ConcurrentBranches branches(cuda, 4);
    EXPECT_EQ(branches.lanes(), 4);
    queue_branches(branches, total, scratch, steps);
  }
  expect_all(total, 26.0f);  // ((1 * 2 + 2) * 2 + 3) * 2 + 4
}

TEST(ConcurrentBranchesCuda, MoreBranchesThanLanesShareLanesInOrder) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor total = Tensor::zeros({kElements}, DType::f32, cuda);
  const Tensor scratch = Tensor::zeros({kElements}, DType::f32, cuda);
  std::vector<Tensor> steps;
  {
    ConcurrentBranches branches(cuda, 3);  // branch 3 goes back to lane 0
    queue_branches(branches, total, scratch, steps);
  }
  expect_all(total, 26.0f);
}

TEST(ConcurrentBranchesCuda, CapturedBranchesReplayWithTheSameResult) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor total = Tensor::zeros({kElements}, DType::f32, cuda);
  const Tensor scratch = Tensor::zeros({kElements}, DType::f32, cuda);
  prepare_concurrent_lanes(cuda, 4);  // streams and handles cannot be made while capturing
  std::vector<Tensor> steps;
  CudaGraph graph(cuda);
  graph.begin_capture();
  {
    ConcurrentBranches branches(cuda, 4);
    queue_branches(branches, total, scratch, steps);
  }
  graph.end_capture();
  EXPECT_GT(graph.num_nodes(), 8u);
  for (int replay = 0; replay < 3; ++replay) {
    total.fill_(0.0);
    graph.replay();
    expect_all(total, 26.0f);
  }
}

TEST(ConcurrentBranchesCuda, LanesCannotBeCreatedInsideACapture) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const int prepared = cuda::prepared_lanes(0);
  if (prepared >= 16) GTEST_SKIP() << "every lane is already prepared in this process";
  CudaGraph graph(cuda);
  graph.begin_capture();
  EXPECT_THROW(ConcurrentBranches(cuda, 16), GraphCaptureError);
  graph.abort_capture();
}

#else
TEST(ConcurrentBranchesCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
