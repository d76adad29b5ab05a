// CPU parallelism: OpenMP over the host cores. The thread count is set once (train --threads, or the
// number of cores) and used by every CPU kernel and by Eigen's GEMM.
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

// Splits [begin, end) into chunks of at least `grain` elements and runs body(lo, hi) on the worker threads.
// Runs inline when the range is small, so tiny tensors pay no threading cost.
template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, Fn&& body) {
  if (end - begin <= grain || num_threads() <= 1) {
    if (end > begin) body(begin, end);
    return;
  }
  detail::parallel_for_impl(begin, end, grain, body);
}

}  // namespace liftoff
