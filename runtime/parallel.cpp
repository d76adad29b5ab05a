#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <omp.h>
#include <Eigen/Core>

#include "runtime/config.h"
#include "runtime/platform/thread_name.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle thread polls before it sleeps. Long enough to bridge the serial gaps between the kernels
// of one step (allocation, autograd bookkeeping: microseconds), short enough that a thread waiting on a
// descheduled partner hands its core back quickly. LIFTOFF_CPU_SPIN_US overrides it (0: sleep at once).
// Kept in a static: every idle poll asks, and config's lookup takes a lock.
std::chrono::microseconds spin_budget() {
  static const std::chrono::microseconds budget(*config::get_int(config::Knob::cpu_spin_us));
  return budget;
}

// Polls `ready` for the spin budget, then returns false (the caller then sleeps on a condition variable).
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto budget = spin_budget();
  if (budget.count() == 0) return ready();
  const auto start = Clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (Clock::now() - start > budget) return ready();
  }
}

thread_local bool t_in_region = false;

// Workers 1..n-1; the calling thread runs chunk 0. One job at a time (the caller holds `busy_`).
class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    spin_budget();  // a malformed LIFTOFF_CPU_SPIN_US throws here, on the caller, not in a worker
    for (int i = 1; i < threads; ++i) {
      workers_.emplace_back([this, i] {
        platform::set_current_thread_name("lo-cpu-" + std::to_string(i));
        worker_loop(i);
      });
    }
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      job_.fetch_add(uint64_t{1} << kChunkBits, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int threads() const { return threads_; }

  // False when another thread is using the pool (the caller then runs the chunks itself).
  bool try_run(int64_t begin, int64_t range, int64_t chunks,
               const std::function<void(int64_t, int64_t)>& body) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    begin_ = begin;
    range_ = range;
    chunks_ = chunks;
    body_ = &body;
    error_ = nullptr;
    remaining_.store(static_cast<int>(chunks - 1), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint64_t next = ((job_.load(std::memory_order_relaxed) >> kChunkBits) + 1) << kChunkBits;
      job_.store(next | static_cast<uint64_t>(chunks), std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    run_chunk(0);
    if (!spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      caller_sleeping_ = true;
      done_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
      caller_sleeping_ = false;
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void run_chunk(int64_t c) {
    const int64_t lo = begin_ + range_ * c / chunks_;
    const int64_t hi = begin_ + range_ * (c + 1) / chunks_;
    if (hi <= lo) return;
    t_in_region = true;
    try {
      (*body_)(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_region = false;
  }

  void worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      const auto fresh = [&] { return job_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(fresh)) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        wake_.wait(lock, fresh);
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      }
      // One snapshot of the job word: its chunk count decides whether this thread takes part, so a late
      // reader never mixes one job's count with the next job's fields.
      seen = job_.load(std::memory_order_acquire);
      if (stop_) return;
      if (static_cast<uint64_t>(index) < (seen & kChunkMask)) {
        run_chunk(index);
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (caller_sleeping_) done_.notify_one();
        }
      }
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex busy_;   // held by the thread that runs a job
  std::mutex mutex_;  // guards sleeping and waking
  std::condition_variable wake_, done_;
  // Job word: (sequence number << kChunkBits) | chunk count of the current job.
  static constexpr int kChunkBits = 16;
  static constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
  std::atomic<uint64_t> job_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> remaining_{0};
  bool caller_sleeping_ = false;
  bool stop_ = false;
  // The current job, written by its caller before job_ moves.
  int64_t begin_ = 0, range_ = 0, chunks_ = 0;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

std::mutex g_config_mutex;
std::atomic<int> g_threads{0};
std::shared_ptr<Pool> g_pool;  // guarded by g_config_mutex; a caller keeps the pool it runs on alive

// Eigen never threads on its own (see the header); set before any kernel runs.
const bool g_eigen_serial = [] {
  Eigen::setNbThreads(1);
  return true;
}();

int default_threads() {
  // OMP_NUM_THREADS still chooses the default, as before the pool existed.
  return std::max(1, omp_get_max_threads());
}

std::shared_ptr<Pool> pool() {
  std::lock_guard<std::mutex> lock(g_config_mutex);
  const int threads = std::min<int>(num_threads(), 1 << 15);
  if (!g_pool || g_pool->threads() != threads) g_pool = std::make_shared<Pool>(threads);
  return g_pool;
}
}  // namespace

void set_num_threads(int threads) {
  const int n = std::max(1, threads);
  (void)g_eigen_serial;
  g_threads.store(n, std::memory_order_release);
}

int num_threads() {
  int n = g_threads.load(std::memory_order_acquire);
  if (n == 0) {
    int expected = 0;
    g_threads.compare_exchange_strong(expected, default_threads());
    n = g_threads.load(std::memory_order_acquire);
  }
  return n;
}

namespace detail {
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& body) {
  const int64_t range = end - begin;
  const int64_t max_chunks = std::max<int64_t>(1, range / std::max<int64_t>(grain, 1));
  const int64_t chunks = std::min<int64_t>(max_chunks, num_threads());
  if (chunks > 1 && !t_in_region) {
    const std::shared_ptr<Pool> p = pool();
    if (p->try_run(begin, range, std::min<int64_t>(chunks, p->threads()), body)) return;
  }
  // Nested, busy pool or one chunk: the same chunks, in order, on this thread.
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = begin + range * c / chunks;
    const int64_t hi = begin + range * (c + 1) / chunks;
    if (hi > lo) body(lo, hi);
  }
}
}  // namespace detail

}  // namespace liftoff
