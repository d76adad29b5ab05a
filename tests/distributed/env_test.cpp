// Rank / world discovery from the launcher's environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/config.h"
#include "runtime/distributed/env.h"
#include "runtime/distributed/process_group.h"
#include "runtime/error.h"

namespace liftoff::distributed {
namespace {

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "LIFTOFF_LAUNCHER", "LOCAL_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
      unsetenv(v);
    }
  }
};

TEST_F(EnvTest, NoVariablesMeansSingleProcess) {
  const DistEnv env = discover_env();
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.launcher, "none");
}

TEST_F(EnvTest, RankWorldLocalRank) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  const DistEnv env = discover_env();
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.launcher, "env");
  EXPECT_TRUE(env.distributed());
}

TEST_F(EnvTest, LocalWorldSizeDefaultsToTheWorldAndIsChecked) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  EXPECT_EQ(discover_env().local_world_size, 8);  // one node assumed
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  EXPECT_EQ(discover_env().local_world_size, 4);
  setenv("LOCAL_WORLD_SIZE", "9", 1);
  EXPECT_THROW(discover_env(), ValueError);  // more local processes than the whole job
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  EXPECT_THROW(discover_env(), ValueError);  // local rank 1 cannot exist among 1 local process
}

TEST_F(EnvTest, ALauncherCanNameItself) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  config::ScopedSetting launcher(config::Knob::launcher, "train --gpus");
  EXPECT_EQ(discover_env().launcher, "train --gpus");
}

TEST_F(EnvTest, LocalRankDefaultsToRank) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_EQ(discover_env().local_rank, 1);
}

TEST_F(EnvTest, OpenMpiVariables) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  const DistEnv env = discover_env();
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.launcher, "mpirun");
}

TEST_F(EnvTest, BadValuesNameTheVariable) {
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "2", 1);
  try {
    discover_env();
    FAIL() << "rank 2 of 2 accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=2"), std::string::npos) << e.what();
  }
  setenv("RANK", "x1", 1);
  EXPECT_THROW(discover_env(), ValueError);
  unsetenv("RANK");
  EXPECT_THROW(discover_env(), ValueError);  // WORLD_SIZE without RANK
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "0", 1);
  EXPECT_THROW(discover_env(), ValueError);
}

TEST_F(EnvTest, TimeoutOverride) {
  ProcessGroupOptions options;
  options.timeout_seconds = 30;
  {
    config::ScopedSetting unset(config::Knob::dist_timeout, std::nullopt);
    EXPECT_DOUBLE_EQ(effective_timeout_seconds(options), 30.0);
  }
  {
    config::ScopedSetting timeout(config::Knob::dist_timeout, "7.5");
    EXPECT_DOUBLE_EQ(effective_timeout_seconds(options), 7.5);
  }
  config::ScopedSetting negative(config::Knob::dist_timeout, "-1");
  EXPECT_THROW(effective_timeout_seconds(options), ValueError);
}

TEST_F(EnvTest, BackendsAndFactoryChecks) {
  EXPECT_EQ(parse_backend("nccl"), Backend::nccl);
  EXPECT_EQ(parse_backend("mpi"), Backend::mpi);
  EXPECT_THROW(parse_backend("gloo"), ValueError);
  EXPECT_EQ(backend_for(Device::cpu()), Backend::mpi);
  EXPECT_EQ(backend_for(Device::cuda(0)), Backend::nccl);
  EXPECT_THROW(make_process_group(Backend::mpi, 2, 2), ValueError);
  if (!backend_built(Backend::mpi)) {
    try {
      make_process_group(Backend::mpi, 0, 1);
      FAIL() << "a build without MPI made an MPI group";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("built without MPI"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace liftoff::distributed
