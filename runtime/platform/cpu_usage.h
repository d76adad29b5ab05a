// CPU time of named threads and the process's memory high-water mark, for the utilization report. Linux reads
// /proc; kept in this platform file so a Windows port swaps this file only.
//
// Threads register themselves by name ("main", "loader-3"); their CPU time (user + system) can then be read
// from any thread, e.g. a sampler. A thread that exits should unregister (or hold a ThreadRegistration) so
// that its final CPU time is kept: /proc forgets a thread once it has exited.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace liftoff::platform {

// Registers the calling thread under `name` (re-registering renames it). Cheap; safe from any thread.
void register_current_thread(const std::string& name);
// Records the calling thread's final CPU time and marks it exited. No-op for an unregistered thread.
void unregister_current_thread();

// RAII: registers the calling thread on construction, unregisters on destruction (put it at the top of a
// worker's thread function).
class ThreadRegistration {
 public:
  explicit ThreadRegistration(const std::string& name) { register_current_thread(name); }
  ~ThreadRegistration() { unregister_current_thread(); }
  ThreadRegistration(const ThreadRegistration&) = delete;
  ThreadRegistration& operator=(const ThreadRegistration&) = delete;
};

struct ThreadCpu {
  std::string name;
  int64_t tid = 0;           // kernel thread id (also the trace's tid for this thread)
  double cpu_seconds = 0.0;  // user + system since the thread started
  bool alive = true;         // false: exited; cpu_seconds is its final value
};

// Every registered thread (alive or exited), in registration order.
std::vector<ThreadCpu> registered_thread_cpu();
// The calling thread's kernel thread id.
int64_t current_thread_id();
// The calling thread's CPU time (user + system), in seconds.
double current_thread_cpu_seconds();
// CPU time of the whole process (all threads, user + system), in seconds.
double process_cpu_seconds();
// Peak resident set size of the process (VmHWM), in bytes; -1 when it cannot be read.
int64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes; -1 when it cannot be read.
int64_t current_rss_bytes();
// Logical CPU cores available to this process.
int host_cores();

}  // namespace liftoff::platform
