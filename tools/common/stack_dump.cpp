#include "tools/common/stack_dump.h"

#include <execinfo.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace liftoff::tools {

namespace {

std::atomic<int> g_dumped{0};  // threads that finished printing in the current round
std::atomic<bool> g_dumping{false};

// Everything below runs inside signal handlers, possibly interrupting a thread that holds malloc's lock: no
// allocation, no stdio; raw system calls and stack buffers only.
int thread_signal() {
  return SIGRTMIN + 3;
}

void write_text(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// Decimal digits of a non-negative number at `out` (at least 21 bytes), NUL-terminated.
void format_number(long value, char* out) {
  char digits[21];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 20);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

void print_own_stack() {
  const auto tid = static_cast<long>(syscall(SYS_gettid));
  char number[21];
  format_number(tid, number);
  char path[64] = "/proc/self/task/";
  std::strcat(path, number);
  std::strcat(path, "/comm");
  char name[32] = "?";
  const int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    const ssize_t got = read(fd, name, sizeof(name) - 1);
    name[got > 0 ? got : 0] = '\0';
    name[std::strcspn(name, "\n")] = '\0';
    close(fd);
  }
  write_text("--- thread ");
  write_text(number);
  write_text(" (");
  write_text(name);
  write_text(")\n");
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
  char number[21];
  format_number(pid, number);
  write_text("=== liftoff: stacks of process ");
  write_text(number);
  write_text(" (C++ names mangled: pipe through c++filt)\n");
  print_own_stack();
  const int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    alignas(8) char entries[4096];
    while (true) {
      const long bytes = syscall(SYS_getdents64, dir, entries, sizeof(entries));
      if (bytes <= 0) break;
      for (long at = 0; at < bytes;) {
        // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
        unsigned short reclen = 0;
        std::memcpy(&reclen, entries + at + 16, sizeof(reclen));
        const char* entry_name = entries + at + 19;
        at += reclen;
        const auto tid = static_cast<pid_t>(std::atoi(entry_name));
        if (tid <= 0 || tid == self) continue;
        const int before = g_dumped.load();
        if (syscall(SYS_tgkill, pid, tid, thread_signal()) != 0) continue;
        // Wait up to 0.5 s for that thread (one blocked with the signal masked never answers).
        for (int i = 0; i < 500 && g_dumped.load() == before; ++i) {
          const timespec ms{0, 1000000};
          nanosleep(&ms, nullptr);
        }
      }
    }
    close(dir);
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
