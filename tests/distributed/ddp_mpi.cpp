// DDP over MPI, run by `mpirun -np 2`: every test is collective (both ranks run it in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "data/dataset.h"
#include "data/loader.h"
#include "runtime/distributed/env.h"
#include "tests/distributed/ddp_common.h"

namespace liftoff {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;
using testing::make_mlp;
using testing::train_steps;

ProcessGroup& group() {
  static std::unique_ptr<ProcessGroup> pg = [] {
    const distributed::DistEnv env = distributed::discover_env();
    return distributed::make_process_group(distributed::Backend::mpi, env.rank, env.world_size);
  }();
  return *pg;
}

// Rank 0's values of every parameter, on every rank.
std::vector<std::vector<double>> rank0_params(Module& model) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : model.parameters()) {
    const Tensor copy = p.clone();
    group().broadcast(copy, 0)->wait();
    out.push_back(copy.to_vector<double>());
  }
  return out;
}

void expect_matches_single_process(int64_t steps, int64_t accum, double bucket_mb) {
  ASSERT_EQ(group().world_size(), 2) << "run with mpirun -np 2";
  const int rank = group().rank();
  // Different initial weights per rank: DDP's start-up broadcast must make them rank 0's.
  auto model = make_mlp(100 + static_cast<uint64_t>(rank), Device::cpu(), DType::f64);
  DDPOptions options;
  options.bucket_cap_mb = bucket_mb;
  DistributedDataParallel ddp(*model, group(), options);
  const int64_t calls_before = group().all_reduce_calls();
  train_steps(*model, &ddp, steps, accum, 8, DType::f64);

  // Exactly one all-reduce per bucket per optimizer step, none for the accumulation micro-batches.
  const auto buckets = static_cast<int64_t>(ddp.buckets().size());
  EXPECT_EQ(group().all_reduce_calls() - calls_before, steps * buckets);
  EXPECT_EQ(ddp.stats().all_reduce_calls, steps * buckets);
  EXPECT_EQ(ddp.stats().sync_steps, steps);

  // Identical on both ranks, bit for bit.
  const auto reference0 = rank0_params(*model);
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].to_vector<double>(), reference0[i]) << "param " << i;

  // Equal (to rounding) to one process training on the combined batch.
  auto single = make_mlp(100, Device::cpu(), DType::f64);
  train_steps(*single, nullptr, steps, accum, 8, DType::f64);
  const auto expected = single->parameters();
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto a = params[i].to_vector<double>();
    const auto b = expected[i].to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k) {
      max_diff = std::max(max_diff, std::abs(a[k] - b[k]));
      max_abs = std::max(max_abs, std::abs(b[k]));
    }
  }
  EXPECT_LT(max_diff, 1e-12 * std::max(1.0, max_abs)) << "DDP differs from the single-process run";
  // The run did move the weights (a DDP that never reduced would fail the comparison, not pass it trivially).
  auto untrained = make_mlp(100, Device::cpu(), DType::f64);
  EXPECT_NE(untrained->parameters()[0].to_vector<double>(), expected[0].to_vector<double>());
}

TEST(DdpMpi, MatchesSingleProcessOnCombinedBatch) {
  expect_matches_single_process(6, 1, 25.0);
}

TEST(DdpMpi, ManySmallBucketsMatchSingleProcess) {
  // 1 KiB cap: the 32x16 and 6x32 weights (f64) are larger and get buckets of their own.
  expect_matches_single_process(4, 1, 1.0 / 1024.0);
}

TEST(DdpMpi, AccumulationReducesOncePerStep) {
  auto model = make_mlp(100, Device::cpu(), DType::f64);
  DistributedDataParallel ddp(*model, group());
  ASSERT_EQ(ddp.buckets().size(), 1u);  // the whole MLP fits in 25 MiB
  const int64_t before = group().all_reduce_calls();
  train_steps(*model, &ddp, 3, 4, 8, DType::f64);
  EXPECT_EQ(group().all_reduce_calls() - before, 3);  // 12 micro-batches, 3 all-reduces
  expect_matches_single_process(3, 4, 25.0);
}

TEST(DdpMpi, BackwardTwiceWithSyncOnIsAnError) {
  auto model = make_mlp(100, Device::cpu(), DType::f64);
  DistributedDataParallel ddp(*model, group());
  const auto b =
      testing::shard_of(testing::combined_micro_batch(0, 8, Device::cpu(), DType::f64), group().rank(), 2);
  cross_entropy(ddp(b.x), b.y).backward();
  EXPECT_THROW(cross_entropy(ddp(b.x), b.y).backward(), ValueError);
  // Both ranks threw at the same point; finish the round so the group stays consistent.
  ddp.synchronize_gradients();
}

TEST(DdpMpi, AllReduceMaxAgreesOnFoundInf) {
  const Tensor found_inf = Tensor::full({1}, group().rank() == 1 ? 1.0 : 0.0, DType::f32);
  auto model = make_mlp(1, Device::cpu(), DType::f32);
  DistributedDataParallel ddp(*model, group());
  ddp.all_reduce_max(found_inf);
  EXPECT_EQ(found_inf.item(), 1.0);
}

// MPI has no 16-bit float types: the group's own sum, average and maximum (through f32 per element), on
// values bf16 and f16 hold exactly. The average divides before the sum, as NCCL's: f16 40,960 on both
// ranks averages to 40,960 (summed first it would be inf).
TEST(DdpMpi, SixteenBitAllReduceSumsAveragesAndMaxes) {
  const double r = group().rank();
  const std::vector<double> mine = {1 + r, 2.5 * (r + 1), -3 + r};
  for (const DType dtype : {DType::bf16, DType::f16}) {
    auto reduced = [&](ReduceOp op, const std::vector<double>& values) {
      const Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(dtype);
      group().all_reduce(t, op)->wait();
      return t.to_vector<double>();
    };
    EXPECT_EQ(reduced(ReduceOp::sum, mine), (std::vector<double>{3, 7.5, -5})) << dtype_name(dtype);
    EXPECT_EQ(reduced(ReduceOp::avg, mine), (std::vector<double>{1.5, 3.75, -2.5})) << dtype_name(dtype);
    EXPECT_EQ(reduced(ReduceOp::max, mine), (std::vector<double>{2, 5, -2})) << dtype_name(dtype);
    EXPECT_EQ(reduced(ReduceOp::avg, {40960.0}), (std::vector<double>{40960.0})) << dtype_name(dtype);
  }
}

// bf16 compression: the f32 buckets travel as bf16 (half the bytes), the ranks stay identical bit for bit,
// and the weights stay within bf16's rounding of the full-precision run (but are not equal to it: the
// gradients did go through bf16).
TEST(DdpMpi, Bf16CompressionHalvesTheBytesAndKeepsTheRanksIdentical) {
  const int rank = group().rank();
  auto full = make_mlp(100 + static_cast<uint64_t>(rank), Device::cpu(), DType::f32);
  auto compressed = make_mlp(100 + static_cast<uint64_t>(rank), Device::cpu(), DType::f32);
  DistributedDataParallel full_ddp(*full, group());
  DDPOptions options;
  options.bf16_compress = true;
  DistributedDataParallel compressed_ddp(*compressed, group(), options);
  train_steps(*full, &full_ddp, 4, 1, 8, DType::f32);
  train_steps(*compressed, &compressed_ddp, 4, 1, 8, DType::f32);
  EXPECT_EQ(compressed_ddp.stats().all_reduce_calls, full_ddp.stats().all_reduce_calls);
  EXPECT_EQ(2 * compressed_ddp.stats().bytes_reduced, full_ddp.stats().bytes_reduced);

  const auto reference0 = rank0_params(*compressed);
  const auto params = compressed->parameters();
  const auto full_params = full->parameters();
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto a = params[i].to_vector<double>();
    EXPECT_EQ(a, reference0[i]) << "param " << i;
    const auto b = full_params[i].to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k) {
      max_diff = std::max(max_diff, std::abs(a[k] - b[k]));
      max_abs = std::max(max_abs, std::abs(b[k]));
    }
  }
  EXPECT_GT(max_diff, 0.0) << "the compressed run equals the full-precision one: nothing went through bf16";
  EXPECT_LT(max_diff, 1e-3 * std::max(1.0, max_abs));
}

TEST(DdpMpi, EvalTotalsAreSummed) {
  EvalTotals local;
  local.correct = 3 + group().rank();
  local.count = 10 + group().rank();
  local.loss_sum = 0.5 * (group().rank() + 1);
  const EvalTotals total = all_reduce_eval(group(), local);
  EXPECT_EQ(total.correct, 7);
  EXPECT_EQ(total.count, 21);
  EXPECT_DOUBLE_EQ(total.loss_sum, 1.5);
}

TEST(DdpMpi, AllGatherValueGivesEveryRankEveryValue) {
  const std::vector<double> values = all_gather_value(group(), 10.0 + group().rank());
  ASSERT_EQ(values.size(), static_cast<size_t>(group().world_size()));
  for (int r = 0; r < group().world_size(); ++r) EXPECT_DOUBLE_EQ(values[static_cast<size_t>(r)], 10.0 + r);
}

TEST(DdpMpi, LoaderShardsPartitionTheEpoch) {
  const ImageDataset data = make_synthetic_dataset(37, 1, 4, 4, 3, 5);
  LoaderOptions o;
  o.batch = 5;
  o.workers = 1;
  o.augment = AugmentMode::none;
  o.rank = group().rank();
  o.world_size = group().world_size();
  o.even_shards = false;
  DataLoader loader(data, o);
  loader.start_epoch(3);
  const Tensor seen = Tensor::zeros({37}, DType::i64);
  for (int64_t i : loader.order()) seen.data<int64_t>()[i] += 1;
  group().all_reduce(seen, ReduceOp::sum)->wait();
  for (int64_t v : seen.to_vector<int64_t>()) EXPECT_EQ(v, 1);  // every sample on exactly one rank
}

TEST(DdpMpi, BarrierAndBroadcast) {
  group().barrier();
  const Tensor t = Tensor::full({4}, static_cast<double>(group().rank() + 5), DType::f32);
  group().broadcast(t, 1)->wait();
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(4, 6.0f));
}

// Started by test_distributed_mpi_kill with LIFTOFF_TEST_KILL_RANK=1: that rank dies after a few steps while
// the other is training; the job must end promptly with the dead rank named.
TEST(DdpMpiKill, RankDiesMidTraining) {
  const char* kill_rank = std::getenv("LIFTOFF_TEST_KILL_RANK");
  if (kill_rank == nullptr) GTEST_SKIP() << "run by test_distributed_mpi_kill";
  auto model = make_mlp(1, Device::cpu(), DType::f32);
  DistributedDataParallel ddp(*model, group());
  SGD optimizer(model->parameters(), 0.01);
  try {
    for (int64_t step = 0; step < 1000000; ++step) {
      if (step == 3 && group().rank() == std::atoi(kill_rank)) std::_Exit(9);
      const auto b = testing::shard_of(testing::combined_micro_batch(step, 8, Device::cpu(), DType::f32),
                                       group().rank(), 2);
      cross_entropy(ddp(b.x), b.y).backward();
      ddp.synchronize_gradients();
      optimizer.step();
      optimizer.zero_grad();
    }
  } catch (const BackendError& e) {
    // What a tool does with a library error: one clear line, exit 1.
    std::fprintf(stderr, "rank %d: error: %s\n", group().rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  FAIL() << "rank " << group().rank() << " kept training after its peer died";
}

}  // namespace
}  // namespace liftoff
