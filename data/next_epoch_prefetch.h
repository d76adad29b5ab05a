// The next epoch begins as soon as the consumer has taken the last batch of this one, so the workers (and
// decode lanes) fill the ring while the training thread finishes the epoch (its device synchronisation, the
// epoch line, an evaluation) instead of after the next start_epoch(): without it every epoch began with an
// empty ring and the GPU idled while the first batches were decoded (docs/perf.md, session 11). A shuffling
// (training) loader does it, unless the epoch just ended is the run's last (`epochs`, when the loader's
// options know it); an evaluation loader (in order) does not, since its next pass is usually far away.
//
// Used by DataLoader and DecodeLoader from their consumer thread only (next(), start_epoch(), order()):
//   next():        if (prefetch.over()) return false;   ... epoch over:
//                  prefetch.after_epoch(epoch_, order_, [&] { begin_epoch(epoch_ + 1); }); return false;
//   start_epoch(): if (prefetch.take(epoch)) return; begin_epoch(epoch);
//   order():       prefetch.order(order_): the finished epoch's while over(), so it still describes the
//                  batches handed out.
// A start_epoch() for another epoch than the one begun early (a resumed run, a user's own order) starts it
// afresh: the ring drops the early batches as any new epoch does.
#pragma once
#include <cstdint>
#include <vector>

namespace liftoff {

class NextEpochPrefetch {
 public:
  NextEpochPrefetch() = default;  // off
  // epochs: the run's epoch count when known (no epoch begins early after epoch epochs - 1), else -1.
  NextEpochPrefetch(bool enabled, int64_t epochs) : enabled_(enabled), epochs_(epochs) {}
  // The epoch `current` (sample order `order`) is over: begins current + 1 through begin() when it should.
  // Remembered only once begin() returned (a failed start is not).
  template <class Begin>
  void after_epoch(int64_t current, const std::vector<int64_t>& order, Begin&& begin) {
    if (!enabled_ || early_ >= 0 || current < 0 || (epochs_ >= 0 && current + 1 >= epochs_)) return;
    finished_order_ = order;
    begin();
    early_ = current + 1;
  }
  // The next epoch began early and start_epoch() was not called yet: next() reports the epoch over.
  bool over() const { return early_ >= 0; }
  // start_epoch(epoch): true when that epoch began early (nothing left to do).
  bool take(int64_t epoch) {
    const bool same = early_ == epoch;
    early_ = -1;
    return same;
  }
  // The order to report: the finished epoch's while the next one began early, else the current one.
  const std::vector<int64_t>& order(const std::vector<int64_t>& current) const {
    return over() ? finished_order_ : current;
  }

 private:
  bool enabled_ = false;
  int64_t epochs_ = -1;
  int64_t early_ = -1;  // the epoch begun early, -1: none
  std::vector<int64_t> finished_order_;
};

}  // namespace liftoff
