// The local launcher behind `train --gpus N`: starts N copies of this program (one per GPU) with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and LIFTOFF_NCCL_ID_FILE (a fresh file through which rank 0 hands
// its NCCL unique id to the others) in their environment, then waits. SIGINT/SIGTERM are forwarded to the
// ranks; when one rank fails the others are stopped (SIGTERM, then SIGKILL after a grace period) and the
// result names the failed rank and its exit status. POSIX specifics (fork, exec, signals, /proc) stay in
// launch.cpp.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace liftoff::tools {

struct LaunchOptions {
  int nprocs = 1;
  // The children's argv (args[0] is the program name they see); the executable is `executable`.
  std::vector<std::string> args;
  std::string executable = "/proc/self/exe";
  std::vector<std::pair<std::string, std::string>> extra_env;
  double kill_grace_seconds = 5.0;  // SIGTERM -> SIGKILL
};

struct LaunchResult {
  // 0 when every rank succeeded; else the failed rank's exit status (128 + signal when it was killed by one),
  // or 130 / 143 when the launcher itself got SIGINT / SIGTERM.
  int exit_code = 0;
  int failed_rank = -1;  // the first rank that failed; -1 when none did
  std::string message;   // one line for stderr, empty on success
};

// Runs the ranks and returns once all have ended. Throws liftoff::Error when a process cannot be started.
LaunchResult launch_local(const LaunchOptions& options);

// argv without `flag` and its value ("--gpus 2" and "--gpus=2"), for the children's command line.
std::vector<std::string> strip_flag(const std::vector<std::string>& argv, const std::string& flag);

}  // namespace liftoff::tools
