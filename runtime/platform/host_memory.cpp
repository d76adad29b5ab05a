#include "runtime/platform/host_memory.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace liftoff::platform {

namespace {

// "<Key>: <n> kB" from a /proc file, in bytes; -1 when absent.
int64_t proc_kb_field(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  const size_t key_len = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, key_len, key) == 0 && line.size() > key_len && line[key_len] == ':') {
      long long kb = -1;
      if (std::sscanf(line.c_str() + key_len + 1, "%lld", &kb) == 1) return kb * 1024;
    }
  }
  return -1;
}

int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return -1;
  }
}

void consider(HostMemoryBudget& b, int64_t bytes, const std::string& why) {
  if (bytes < 0) return;
  if (b.available_bytes < 0 || bytes < b.available_bytes) {
    b.available_bytes = bytes;
    b.limited_by = why;
  }
}

// cgroup v2: "0::/a/b" in /proc/self/cgroup; a limit may sit on any ancestor.
void consider_cgroups(HostMemoryBudget& b) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return;
  for (;;) {
    const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    const int64_t max = read_number(dir + "/memory.max");
    const int64_t current = read_number(dir + "/memory.current");
    if (max >= 0 && current >= 0)
      consider(b, max > current ? max - current : 0, "cgroup memory.max of " + path);
    if (path == "/" || path.empty()) break;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

}  // namespace

HostMemoryBudget host_memory_budget() {
  HostMemoryBudget b;
  consider(b, proc_kb_field("/proc/meminfo", "MemAvailable"), "MemAvailable");
  consider_cgroups(b);
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t used = proc_kb_field("/proc/self/status", "VmSize");
    const auto cap = static_cast<int64_t>(limit.rlim_cur);
    if (used >= 0) consider(b, cap > used ? cap - used : 0, "ulimit -v");
  }
  return b;
}

int64_t heap_bytes_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = ::mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

}  // namespace liftoff::platform
