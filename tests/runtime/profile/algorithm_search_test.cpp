#include "runtime/profile/algorithm_search.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace liftoff {
namespace {

// Totals only grow, by one search and its seconds per record, from any thread.
TEST(AlgorithmSearch, TotalsCountEverySearchFromEveryThread) {
  const AlgorithmSearchTotals before = algorithm_search_totals();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 100; ++i) record_algorithm_search(0.25);
    });
  }
  for (std::thread& t : threads) t.join();
  const AlgorithmSearchTotals after = algorithm_search_totals();
  EXPECT_EQ(after.searches - before.searches, 400);
  EXPECT_DOUBLE_EQ(after.seconds - before.seconds, 100.0);
}

}  // namespace
}  // namespace liftoff
