// How much host memory this process may still take, and how much its heap holds now. Linux reads
// /proc/meminfo, the cgroup (v2) limits and RLIMIT_AS; kept in this platform file so a port swaps this file.
#pragma once
#include <cstdint>
#include <string>

namespace liftoff::platform {

struct HostMemoryBudget {
  int64_t available_bytes = -1;  // -1: unknown
  std::string limited_by;        // what sets it: "MemAvailable", "cgroup memory.max of /x", "ulimit -v"
};

// The smallest of: the machine's MemAvailable, the room left under every cgroup memory.max above this
// process, and the address space left under RLIMIT_AS (ulimit -v).
HostMemoryBudget host_memory_budget();

// Bytes the C heap has handed out and not taken back (glibc mallinfo2: small + mmapped blocks); -1 when the
// C library cannot say.
int64_t heap_bytes_in_use();

}  // namespace liftoff::platform
