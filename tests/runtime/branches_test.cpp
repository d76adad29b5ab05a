// ConcurrentBranches on the CPU: branches simply run in order, and the shared-state calls are no-ops.
#include <gtest/gtest.h>

#include "runtime/branches.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace liftoff {
namespace {

TEST(ConcurrentBranches, OnTheCpuBranchesRunInOrderOnOneLane) {
  const Tensor total = Tensor::zeros({8}, DType::f32, Device::cpu());
  const Tensor step = Tensor::zeros({8}, DType::f32, Device::cpu());
  {
    ConcurrentBranches branches(Device::cpu(), 4);
    EXPECT_EQ(branches.lanes(), 1);
    for (int k = 0; k < 4; ++k) {
      branches.enter(k);
      order_shared_state(total.raw_data());
      accumulate_into(total, total);  // total = 2 * total + (k + 1): the order shows in the result
      step.fill_(k + 1);
      accumulate_into(total, step);
      record_shared_state(total.raw_data());
    }
    branches.join();
  }
  const float* t = static_cast<const float*>(total.raw_data());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t[i], 26.0f);  // ((1 * 2 + 2) * 2 + 3) * 2 + 4
}

TEST(ConcurrentBranches, RejectsBadLaneCountsAndNesting) {
  EXPECT_THROW(ConcurrentBranches(Device::cpu(), 0), ValueError);
  EXPECT_THROW(ConcurrentBranches(Device::cpu(), 17), ValueError);
  ConcurrentBranches outer(Device::cpu(), 2);
  EXPECT_THROW(ConcurrentBranches(Device::cpu(), 2), ValueError);
  EXPECT_THROW(outer.enter(-1), ValueError);
  outer.join();
  EXPECT_THROW(outer.enter(0), ValueError);
  ConcurrentBranches after(Device::cpu(), 2);  // the joined set no longer blocks a new one
  EXPECT_EQ(after.lanes(), 1);
}

TEST(ConcurrentBranches, SharedStateCallsOutsideBranchesAreNoOps) {
  int key = 0;
  order_shared_state(&key);
  record_shared_state(&key);
  const BranchMemory m = branch_memory(Device::cpu());
  EXPECT_EQ(m.free_bytes, 0);
  EXPECT_EQ(m.peak_allocated, 0);
}

}  // namespace
}  // namespace liftoff
