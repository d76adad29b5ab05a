// NCCL paths on one GPU (world size 1): the full DDP training step (hooks, buckets on the comm stream, the
// compute stream waiting on them) must give exactly the single-process result, plus the collectives, the
// found_inf agreement and the timings. Multi-GPU runs are made by hand (see the DDP notes).
#include <gtest/gtest.h>

#include <cstdlib>

#include "models/train/amp.h"
#include "runtime/distributed/process_group.h"
#include "tests/common/cuda_test.h"
#include "tests/distributed/ddp_common.h"

namespace liftoff {
namespace {

using distributed::Backend;
using distributed::ProcessGroup;
using distributed::ReduceOp;

#define LIFTOFF_REQUIRE_NCCL()                                                                \
  do {                                                                                        \
    LIFTOFF_REQUIRE_CUDA();                                                                   \
    if (!distributed::backend_built(Backend::nccl)) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

std::unique_ptr<ProcessGroup> single_gpu_group() {
  distributed::ProcessGroupOptions options;
  options.cuda_device = 0;
  return distributed::make_process_group(Backend::nccl, 0, 1, options);
}

TEST(NcclCuda, FullTrainingStepMatchesSingleProcess) {
  LIFTOFF_REQUIRE_NCCL();
  auto group = single_gpu_group();
  EXPECT_EQ(group->device(), Device::cuda(0));
  auto model = testing::make_mlp(100, Device::cuda(0), DType::f32);
  DDPOptions options;
  options.bucket_cap_mb = 1.0 / 1024.0;  // several buckets, launched from the hooks during backward
  options.first_bucket_cap_mb = 1.0 / 1024.0;
  DistributedDataParallel ddp(*model, *group, options);
  ASSERT_GT(ddp.buckets().size(), 2u);
  testing::train_steps(*model, &ddp, 5, 2, 8, DType::f32);

  auto single = testing::make_mlp(100, Device::cuda(0), DType::f32);
  testing::train_steps(*single, nullptr, 5, 2, 8, DType::f32);
  const auto a = model->parameters();
  const auto b = single->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "param " << i;  // avg over 1 rank: exact
  }
  EXPECT_EQ(ddp.stats().all_reduce_calls, 5 * static_cast<int64_t>(ddp.buckets().size()));
  synchronize(Device::cuda(0));
  const DDPStats stats = ddp.stats();
  EXPECT_EQ(stats.timed_steps, 5);
  EXPECT_TRUE(stats.device_timed);
  EXPECT_GT(stats.comm_ms, 0.0);
  EXPECT_GE(stats.exposed_ms, 0.0);
  EXPECT_NEAR(stats.comm_ms, stats.exposed_ms + stats.overlapped_ms, 1e-3 + 1e-6 * stats.comm_ms);
}

// bf16 compression on the CUDA path (casts on the compute stream around the comm stream's all-reduce): over
// one rank each gradient is the single-process one rounded through bf16, and half the bytes travel.
TEST(NcclCuda, Bf16CompressionRoundsTheGradientsThroughBf16) {
  LIFTOFF_REQUIRE_NCCL();
  auto group = single_gpu_group();
  auto model = testing::make_mlp(100, Device::cuda(0), DType::f32);
  auto single = testing::make_mlp(100, Device::cuda(0), DType::f32);
  DDPOptions options;
  options.bf16_compress = true;
  DistributedDataParallel ddp(*model, *group, options);
  const testing::MicroBatch b = testing::combined_micro_batch(0, 8, Device::cuda(0), DType::f32);
  cross_entropy((*model)(b.x), b.y).backward();
  ddp.synchronize_gradients();
  cross_entropy((*single)(b.x), b.y).backward();
  const auto a = model->parameters();
  const auto expected = single->parameters();
  int64_t f32_bytes = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].grad().to_vector<float>(),
              expected[i].grad().to(DType::bf16).to(DType::f32).to_vector<float>())
        << "param " << i;
    f32_bytes += static_cast<int64_t>(a[i].nbytes());
  }
  EXPECT_EQ(2 * ddp.stats().bytes_reduced, f32_bytes);
}

TEST(NcclCuda, BackwardWithoutSyncLeavesGradientsLocal) {
  LIFTOFF_REQUIRE_NCCL();
  auto group = single_gpu_group();
  auto model = testing::make_mlp(3, Device::cuda(0), DType::f32);
  DistributedDataParallel ddp(*model, *group);
  const auto b = testing::combined_micro_batch(0, 8, Device::cuda(0), DType::f32);
  {
    DistributedDataParallel::NoSyncGuard no_sync(ddp);
    cross_entropy(ddp(b.x), b.y).backward();
    ddp.synchronize_gradients();  // a no-op without sync
  }
  EXPECT_EQ(group->all_reduce_calls(), 0);
  cross_entropy(ddp(b.x), b.y).backward();
  ddp.synchronize_gradients();
  EXPECT_EQ(group->all_reduce_calls(), 1);
}

TEST(NcclCuda, CollectivesAndEvalTotals) {
  LIFTOFF_REQUIRE_NCCL();
  auto group = single_gpu_group();
  const Tensor t = Tensor::full({1000}, 3.0, DType::bf16, Device::cuda(0));
  group->all_reduce(t, ReduceOp::avg)->wait();
  group->broadcast(t, 0)->wait();
  group->barrier();
  EXPECT_EQ(t.to(DType::f32).to_vector<float>(), std::vector<float>(1000, 3.0f));
  EvalTotals local;
  local.correct = 5;
  local.count = 9;
  local.loss_sum = 2.25;
  const EvalTotals total = all_reduce_eval(*group, local);
  EXPECT_EQ(total.correct, 5);
  EXPECT_EQ(total.count, 9);
  EXPECT_DOUBLE_EQ(total.loss_sum, 2.25);
  EXPECT_THROW(group->all_reduce(Tensor::zeros({2}), ReduceOp::sum), DeviceError);
}

TEST(NcclCuda, FoundInfIsAgreedOnTheDevice) {
  LIFTOFF_REQUIRE_NCCL();
  auto group = single_gpu_group();
  auto model = testing::make_mlp(3, Device::cuda(0), DType::f32);
  DistributedDataParallel ddp(*model, *group);
  SGD optimizer(model->parameters(), 0.1);
  GradScaler scaler(Device::cuda(0));
  const auto b = testing::combined_micro_batch(0, 8, Device::cuda(0), DType::f32);
  scaler.scale(cross_entropy(ddp(b.x), b.y)).backward();
  ddp.synchronize_gradients();
  scaler.unscale_(optimizer);
  ddp.sync_found_inf(scaler);
  scaler.step(optimizer);
  scaler.update();
  EXPECT_EQ(scaler.found_inf().item(), 0.0);
}

}  // namespace
}  // namespace liftoff
