#include "tools/train/launch.h"

#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/distributed/env.h"
#include "runtime/error.h"

extern char** environ;

namespace liftoff::tools {

namespace {

volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) {
  g_signal = sig;
}

using Clock = std::chrono::steady_clock;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return str_cat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return str_cat("was killed by signal ", sig, name != nullptr ? str_cat(" (", name, ")") : "");
  }
  return str_cat("ended with wait status ", status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Restores the previous SIGINT/SIGTERM handlers on scope exit.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

std::vector<std::string> strip_flag(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0 && argv[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (i > 0 && argv[i].rfind(flag + "=", 0) == 0) continue;
    out.push_back(argv[i]);
  }
  return out;
}

LaunchResult launch_local(const LaunchOptions& options) {
  LIFTOFF_CHECK(options.nprocs >= 1, ValueError, "--gpus ", options.nprocs, " must be at least 1");
  LIFTOFF_CHECK(!options.args.empty(), ValueError, "launch_local: empty command line");

  char dir_template[] = "/tmp/liftoff-launch-XXXXXX";
  LIFTOFF_CHECK(mkdtemp(dir_template) != nullptr, IOError,
                "cannot create a temporary directory in /tmp: ", std::strerror(errno));
  const std::string dir = dir_template;
  const std::string id_file = dir + "/nccl_id";

  // Everything the children need is built before fork: after fork only async-signal-safe calls are made.
  std::vector<char*> argv;
  for (const std::string& a : options.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> overridden = {"RANK",
                                               "WORLD_SIZE",
                                               "LOCAL_RANK",
                                               "LOCAL_WORLD_SIZE",
                                               "LIFTOFF_LAUNCHER",
                                               distributed::kNcclIdFileEnv};
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool skip = false;
    for (const std::string& o : overridden) skip = skip || key == o;
    for (const auto& [k, v] : options.extra_env) skip = skip || key == k;
    if (!skip) base_env.push_back(entry);
  }
  for (const auto& [k, v] : options.extra_env) base_env.push_back(k + "=" + v);
  const std::string world = std::to_string(options.nprocs);
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(options.nprocs), base_env);
  std::vector<std::vector<char*>> envps(static_cast<size_t>(options.nprocs));
  for (int r = 0; r < options.nprocs; ++r) {
    auto& env = envs[static_cast<size_t>(r)];
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + world);
    env.push_back("LOCAL_WORLD_SIZE=" + world);
    env.push_back(std::string(distributed::kNcclIdFileEnv) + "=" + id_file);
    env.push_back("LIFTOFF_LAUNCHER=train --gpus");
    for (std::string& e : env) envps[static_cast<size_t>(r)].push_back(e.data());
    envps[static_cast<size_t>(r)].push_back(nullptr);
  }

  SignalForwarding forwarding;
  const pid_t parent = getpid();
  std::vector<pid_t> pids(static_cast<size_t>(options.nprocs), -1);
  std::vector<bool> alive(pids.size(), false);
  const auto signal_all = [&](int sig) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (alive[r]) kill(pids[r], sig);
    }
  };
  for (int r = 0; r < options.nprocs; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      signal_all(SIGKILL);
      for (size_t k = 0; k < pids.size(); ++k) {
        if (alive[k]) waitpid(pids[k], nullptr, 0);
      }
      throw Error(str_cat("cannot start rank ", r, ": fork failed: ", why));
    }
    if (pid == 0) {
      // Own process group: the terminal's Ctrl-C reaches the launcher, which forwards it once. Die with the
      // launcher (Linux) so no rank outlives it: SIGKILL, since a rank stuck in a collective never gets to
      // act on SIGTERM (the launcher forwards the graceful signals itself while it lives).
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      execve(options.executable.c_str(), argv.data(), envps[static_cast<size_t>(r)].data());
      const char* msg = "liftoff launcher: exec failed\n";
      ssize_t ignored = write(2, msg, std::strlen(msg));
      (void)ignored;
      _exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
    alive[static_cast<size_t>(r)] = true;
  }

  LaunchResult result;
  int forwarded = 0;
  bool stopping = false;
  Clock::time_point stop_at{};
  size_t running = pids.size();
  while (running > 0) {
    if (g_signal != 0 && forwarded == 0) {
      forwarded = g_signal;
      signal_all(forwarded);
      if (!stopping) {
        stopping = true;
        stop_at = Clock::now();
      }
    }
    bool reaped = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (!alive[r]) continue;
      int status = 0;
      const pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      alive[r] = false;
      --running;
      reaped = true;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && !stopping && result.failed_rank < 0) {
        result.failed_rank = static_cast<int>(r);
        result.exit_code = exit_code_of(status);
        result.message = str_cat("rank ", r, " of ", options.nprocs, " (pid ", pids[r], ") ",
                                 describe_status(status), "; stopping the other ranks");
        stopping = true;
        stop_at = Clock::now();
        signal_all(SIGTERM);
      }
    }
    if (stopping && running > 0 &&
        std::chrono::duration<double>(Clock::now() - stop_at).count() > options.kill_grace_seconds) {
      signal_all(SIGKILL);
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (forwarded != 0 && result.failed_rank < 0) {
    result.exit_code = 128 + forwarded;
    result.message = str_cat("interrupted (signal ", forwarded, "): stopped all ", options.nprocs, " ranks");
  }
  unlink(id_file.c_str());
  unlink((id_file + ".tmp").c_str());
  rmdir(dir.c_str());
  return result;
}

}  // namespace liftoff::tools
