#include "tools/common/stack_dump.h"

#include <dirent.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace liftoff::tools {

namespace {

std::atomic<int> g_dumped{0};  // threads that finished printing in the current round
std::atomic<bool> g_dumping{false};

int thread_signal() {
  return SIGRTMIN + 3;
}

void write_text(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void print_own_stack() {
  char header[96];
  const auto tid = static_cast<long>(syscall(SYS_gettid));
  char name[32] = "?";
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
  if (FILE* f = std::fopen(path, "r")) {
    if (std::fgets(name, sizeof(name), f) != nullptr) name[std::strcspn(name, "\n")] = '\0';
    std::fclose(f);
  }
  std::snprintf(header, sizeof(header), "--- thread %ld (%s)\n", tid, name);
  write_text(header);
  void* frames[48];
  const int n = backtrace(frames, 48);
  // Skip this function and the signal handler frame.
  backtrace_symbols_fd(frames + 2, n > 2 ? n - 2 : 0, STDERR_FILENO);
}

extern "C" void on_thread_signal(int) {
  print_own_stack();
  g_dumped.fetch_add(1);
}

// Visits the other threads one at a time so their stacks do not interleave.
extern "C" void on_dump_signal(int) {
  bool expected = false;
  if (!g_dumping.compare_exchange_strong(expected, true)) return;
  const pid_t pid = getpid();
  const auto self = static_cast<pid_t>(syscall(SYS_gettid));
  char header[64];
  std::snprintf(header, sizeof(header), "=== liftoff: stacks of process %d\n", static_cast<int>(pid));
  write_text(header);
  print_own_stack();
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      const auto tid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (tid <= 0 || tid == self) continue;
      const int before = g_dumped.load();
      if (syscall(SYS_tgkill, pid, tid, thread_signal()) != 0) continue;
      // Wait up to 0.5 s for that thread (one blocked with the signal masked never answers).
      for (int i = 0; i < 500 && g_dumped.load() == before; ++i) {
        const timespec ms{0, 1000000};
        nanosleep(&ms, nullptr);
      }
    }
    closedir(dir);
  }
  write_text("=== end of stacks\n");
  g_dumping.store(false);
}

}  // namespace

void install_stack_dump_signal(int signal) {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside a signal handler
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  action.sa_handler = on_thread_signal;
  sigaction(thread_signal(), &action, nullptr);
  action.sa_handler = on_dump_signal;
  sigaction(signal, &action, nullptr);
}

}  // namespace liftoff::tools
