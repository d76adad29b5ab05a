// The local launcher: ranks get their environment; a failing rank stops the others, is named, and its status
// is returned; signals reach the ranks. The children are this test binary, re-run on one child test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/distributed/env.h"
#include "tools/train/launch.h"

namespace liftoff::tools {
namespace {

const char* role() {
  return std::getenv("LIFTOFF_LAUNCH_TEST_ROLE");
}

LaunchOptions child_options(const std::string& child_test, const std::string& role_name, int n) {
  LaunchOptions o;
  o.nprocs = n;
  o.args = {"test_distributed", "--gtest_filter=LaunchChild." + child_test};
  o.extra_env = {{"LIFTOFF_LAUNCH_TEST_ROLE", role_name}};
  o.kill_grace_seconds = 2.0;
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Child side: only does something when started by the launcher.
TEST(LaunchChild, Role) {
  if (role() == nullptr) GTEST_SKIP() << "run by the Launch tests";
  const distributed::DistEnv env = distributed::discover_env();
  const std::string r = role();
  if (r == "env") {
    // Each rank leaves a file named after its rank in the parent's directory when its environment is right.
    const char* id_file = std::getenv(distributed::kNcclIdFileEnv);
    const char* out_dir = std::getenv("LIFTOFF_LAUNCH_TEST_DIR");
    const bool ok = env.world_size == 3 && env.local_rank == env.rank && env.launcher == "train --gpus" &&
                    id_file != nullptr && std::string(id_file).find("/tmp/liftoff-launch-") == 0 &&
                    out_dir != nullptr;
    if (ok) std::ofstream(std::string(out_dir) + "/rank" + std::to_string(env.rank)) << "ok";
    std::_Exit(ok ? 0 : 1);
  }
  if (r == "fail") {
    if (env.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::_Exit(9);  // dies mid-run
    }
    std::this_thread::sleep_for(std::chrono::seconds(120));  // stands for a rank blocked in a collective
    std::_Exit(0);
  }
  if (r == "ok") std::_Exit(0);
  if (r == "sleep") {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    std::_Exit(0);
  }
}

TEST(Launch, StripFlag) {
  EXPECT_EQ(strip_flag({"train", "--gpus", "2", "--epochs", "1"}, "--gpus"),
            (std::vector<std::string>{"train", "--epochs", "1"}));
  EXPECT_EQ(strip_flag({"train", "--gpus=4", "--batch", "8"}, "--gpus"),
            (std::vector<std::string>{"train", "--batch", "8"}));
}

TEST(Launch, AllRanksSucceed) {
  const LaunchResult result = launch_local(child_options("Role", "ok", 3));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_TRUE(result.message.empty());
}

TEST(Launch, RanksSeeTheirEnvironment) {
  char dir[] = "/tmp/liftoff-launch-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  LaunchOptions o = child_options("Role", "env", 3);
  o.extra_env.push_back({"LIFTOFF_LAUNCH_TEST_DIR", dir});
  const LaunchResult result = launch_local(o);
  EXPECT_EQ(result.exit_code, 0) << result.message;
  for (int r = 0; r < 3; ++r) {
    const std::string file = std::string(dir) + "/rank" + std::to_string(r);
    EXPECT_TRUE(std::ifstream(file).good()) << "rank " << r << " did not report a correct environment";
    std::remove(file.c_str());
  }
  rmdir(dir);
}

TEST(Launch, FailedRankStopsTheOthersAndIsNamed) {
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = launch_local(child_options("Role", "fail", 3));
  const double took = seconds_since(start);
  EXPECT_EQ(result.failed_rank, 1) << result.message;
  EXPECT_EQ(result.exit_code, 9);
  EXPECT_NE(result.message.find("rank 1 of 3"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("exited with status 9"), std::string::npos) << result.message;
  EXPECT_LT(took, 20.0) << "the other ranks were not stopped promptly";
}

TEST(Launch, SignalIsForwarded) {
  const auto start = std::chrono::steady_clock::now();
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGTERM);
  });
  const LaunchResult result = launch_local(child_options("Role", "sleep", 2));
  interrupter.join();
  EXPECT_EQ(result.exit_code, 143) << result.message;
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_LT(seconds_since(start), 20.0);
}

TEST(Launch, MissingExecutableFailsEveryRank) {
  LaunchOptions o = child_options("Role", "ok", 2);
  o.executable = "/nonexistent/liftoff-train";
  const LaunchResult result = launch_local(o);
  EXPECT_GE(result.failed_rank, 0);
  EXPECT_EQ(result.exit_code, 127);
}

}  // namespace
}  // namespace liftoff::tools
