// CPU parallelism: a small pool of host threads. The thread count is set once (train --threads, or the
// number of cores) and used by every CPU kernel through parallel_for. Eigen's GEMM runs single-threaded: the
// kernels split their own work (images, rows, columns) across the pool instead.
//
// Why not OpenMP: libgomp's idle threads spin for milliseconds at every barrier (GOMP_SPINCOUNT), which on a
// machine shared with other processes burns the time slices the lagging thread needs; a training step has
// hundreds of parallel regions. The pool spins briefly (tens of microseconds) and then sleeps. docs/perf.md
// ("CPU training speed vs PyTorch") has the measurements.
#pragma once
#include <cstdint>
#include <functional>

namespace liftoff {

void set_num_threads(int threads);
int num_threads();

namespace detail {
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& body);
}

// Splits [begin, end) into at most num_threads() chunks of at least `grain` elements and runs body(lo, hi) on
// the pool. The split depends only on the range, the grain and the thread count (never on timing), so results
// are deterministic for a given thread count. Runs inline when the range is small, so tiny tensors pay no
// threading cost; a call from inside a parallel region (or while another thread holds the pool) runs the same
// chunks one after another on the calling thread. An exception thrown by body is rethrown here.
template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, Fn&& body) {
  if (end - begin <= grain || num_threads() <= 1) {
    if (end > begin) body(begin, end);
    return;
  }
  detail::parallel_for_impl(begin, end, grain, body);
}

}  // namespace liftoff
