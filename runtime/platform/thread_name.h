// The name a thread shows to the system (top -H, gdb, /proc/<pid>/task/<tid>/comm, and the `kill -USR1` stack
// dump of the tools). Every thread the library starts names itself with this helper ("lo-worker-3",
// "lo-decode-1", "lo-nvml"), so that a dump or a profiler says whose stack it is. Linux sets it with
// pthread_setname_np; elsewhere it does nothing. Kept in this platform file so a port swaps this file only.
#pragma once
#include <string>

namespace liftoff::platform {

// Longest name the system keeps (Linux: 16 bytes with the terminating NUL); longer names are cut to it.
constexpr size_t kMaxThreadNameLength = 15;

// Names the calling thread. Never throws; a name the system refuses is ignored (it is a debugging aid).
void set_current_thread_name(const std::string& name);

// The calling thread's name as the system reports it; empty where unsupported.
std::string current_thread_name();

}  // namespace liftoff::platform
