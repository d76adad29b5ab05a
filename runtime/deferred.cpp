#include "runtime/deferred.h"

#include <vector>

namespace liftoff {

namespace {
// Per thread: ops and autograd run on the thread that builds the graph.
thread_local std::vector<std::weak_ptr<DeferredWrite>> registered;
}  // namespace

void register_deferred_write(const std::shared_ptr<DeferredWrite>& w) {
  // Forward passes without a backward (evaluation) never flush: drop the dead entries now and then.
  if (registered.size() >= 256) {
    std::vector<std::weak_ptr<DeferredWrite>> alive;
    for (auto& entry : registered) {
      if (auto live = entry.lock(); live && live->pending()) alive.push_back(std::move(entry));
    }
    registered = std::move(alive);
  }
  registered.push_back(w);
}

void flush_deferred_writes() {
  std::vector<std::weak_ptr<DeferredWrite>> now;
  now.swap(registered);
  for (auto& entry : now) {
    if (auto live = entry.lock()) live->run();
  }
}

}  // namespace liftoff
