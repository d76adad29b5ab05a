#include "runtime/platform/cpu_usage.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

namespace liftoff::platform {

namespace {

struct Entry {
  std::string name;
  int64_t tid = 0;
  bool alive = true;
  double final_cpu = 0.0;
};

struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

double ticks_per_second() {
  static const double hz = [] {
    const long v = sysconf(_SC_CLK_TCK);
    return v > 0 ? static_cast<double>(v) : 100.0;
  }();
  return hz;
}

// utime + stime of one thread from /proc/self/task/<tid>/stat; < 0 when the thread is gone.
double thread_cpu_from_proc(int64_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%lld/stat", static_cast<long long>(tid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1.0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1.0;
  unsigned long long utime = 0, stime = 0;
  // After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime(14)
  // stime(15)
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return -1.0;
  return static_cast<double>(utime + stime) / ticks_per_second();
}

int64_t status_field_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t value = -1;
  const size_t key_len = std::strlen(key);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
      long long kb = 0;
      if (std::sscanf(line + key_len + 1, "%lld", &kb) == 1) value = kb;
      break;
    }
  }
  std::fclose(f);
  return value;
}

}  // namespace

int64_t current_thread_id() {
  return static_cast<int64_t>(syscall(SYS_gettid));
}

double current_thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void register_current_thread(const std::string& name) {
  const int64_t tid = current_thread_id();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Entry& e : r.entries) {
    if (e.tid == tid && e.alive) {
      e.name = name;
      return;
    }
  }
  r.entries.push_back(Entry{name, tid, true, 0.0});
}

void unregister_current_thread() {
  const int64_t tid = current_thread_id();
  const double cpu = current_thread_cpu_seconds();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Entry& e : r.entries) {
    if (e.tid == tid && e.alive) {
      e.alive = false;
      e.final_cpu = cpu;
      return;
    }
  }
}

std::vector<ThreadCpu> registered_thread_cpu() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<ThreadCpu> out;
  out.reserve(r.entries.size());
  for (Entry& e : r.entries) {
    if (e.alive) {
      const double cpu = thread_cpu_from_proc(e.tid);
      if (cpu >= 0) {
        e.final_cpu = cpu;  // the latest value seen, kept if the thread later exits without unregistering
      } else {
        e.alive = false;  // gone without unregistering: its last seen value is a lower bound
      }
    }
    out.push_back(ThreadCpu{e.name, e.tid, e.final_cpu, e.alive});
  }
  return out;
}

double process_cpu_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + 1e-6 * static_cast<double>(tv.tv_usec);
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

int64_t peak_rss_bytes() {
  const int64_t kb = status_field_kb("VmHWM");
  if (kb >= 0) return kb * 1024;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

int64_t current_rss_bytes() {
  const int64_t kb = status_field_kb("VmRSS");
  return kb >= 0 ? kb * 1024 : -1;
}

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace liftoff::platform
