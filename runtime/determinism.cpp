#include "runtime/determinism.h"

#include <atomic>

namespace liftoff {

namespace {
std::atomic<bool> g_deterministic{false};
}  // namespace

void set_deterministic_algorithms(bool on) {
  g_deterministic.store(on);
}
bool deterministic_algorithms() {
  return g_deterministic.load();
}

}  // namespace liftoff
