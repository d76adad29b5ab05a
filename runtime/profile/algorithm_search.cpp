#include "runtime/profile/algorithm_search.h"

#include <mutex>

namespace liftoff {
namespace {
std::mutex& totals_mutex() {
  static std::mutex mutex;
  return mutex;
}
AlgorithmSearchTotals& totals() {
  static AlgorithmSearchTotals value;
  return value;
}
}  // namespace

void record_algorithm_search(double seconds) {
  std::lock_guard<std::mutex> lock(totals_mutex());
  ++totals().searches;
  totals().seconds += seconds;
}

void record_algorithm_restored(const std::string& store_path) {
  std::lock_guard<std::mutex> lock(totals_mutex());
  ++totals().restored;
  totals().store = store_path;
}

void record_algorithm_store(const std::string& store_path) {
  std::lock_guard<std::mutex> lock(totals_mutex());
  totals().store = store_path;
}

AlgorithmSearchTotals algorithm_search_totals() {
  std::lock_guard<std::mutex> lock(totals_mutex());
  return totals();
}

}  // namespace liftoff
