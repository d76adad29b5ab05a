// A write into a storage that has not been issued yet. An op may hand out its output before launching the
// kernel that fills it (batch norm's normalize pass), so that the next op can fold that kernel into its own
// (relu, a residual add): one pass over the activation instead of two or three. Whoever touches the memory
// first (Storage::data) issues the write, so a reader always sees the values the op promised.
//
// The deferred kernel reads its inputs (and parameters) when it is issued, so every pending write of a thread
// is issued before autograd's backward (flush_deferred_writes): after that, parameters may change.
#pragma once
#include <memory>

namespace liftoff {

class DeferredWrite {
 public:
  virtual ~DeferredWrite() = default;
  bool pending() const { return pending_; }
  // Issues the write if it has not been issued yet.
  void run() {
    if (!pending_) return;
    pending_ = false;
    issue();
  }
  // Marks the write done without issuing it, for a caller that does its work in a launch of its own (batch
  // norm's statistics taken with the normalize pass); false when it was not pending.
  bool claim() {
    if (!pending_) return false;
    pending_ = false;
    return true;
  }

 protected:
  virtual void issue() = 0;

 private:
  bool pending_ = true;
};

// Remembers w (weakly) so that flush_deferred_writes() on this thread issues it while it is alive and
// pending.
void register_deferred_write(const std::shared_ptr<DeferredWrite>& w);
// Issues every pending write registered on this thread.
void flush_deferred_writes();

}  // namespace liftoff
