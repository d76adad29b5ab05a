#include "runtime/parallel.h"

#include <algorithm>

#include <Eigen/Core>
#include <omp.h>

namespace liftoff {

void set_num_threads(int threads) {
  const int n = std::max(1, threads);
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int num_threads() { return omp_get_max_threads(); }

namespace detail {
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& body) {
  const int64_t range = end - begin;
  const int64_t max_chunks = std::max<int64_t>(1, range / std::max<int64_t>(grain, 1));
  const int64_t chunks = std::min<int64_t>(max_chunks, num_threads());
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(chunks))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = begin + range * c / chunks;
    const int64_t hi = begin + range * (c + 1) / chunks;
    if (hi > lo) body(lo, hi);
  }
}
}  // namespace detail

}  // namespace liftoff
