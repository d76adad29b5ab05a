// The next epoch begins as soon as the consumer has taken the last batch of this one, so the workers (and
// decode lanes) fill the ring while the training thread finishes the epoch (its device synchronisation, the
// epoch line, an evaluation) instead of after the next start_epoch(): without it every epoch began with an
// empty ring and the GPU idled while the first batches were decoded. A shuffling (training) loader does it;
// an evaluation loader (in order) does not, since its next pass is usually far away.
//
// Used by DataLoader and DecodeLoader from their consumer thread only (next(), start_epoch()):
//   next():        if (prefetch.over()) return false;   ... epoch over: if (prefetch.begin_after(epoch_))
//                  begin_epoch(epoch_ + 1); return false;
//   start_epoch(): if (prefetch.take(epoch)) return; begin_epoch(epoch);
// A start_epoch() for another epoch than the one begun early (a resumed run, a user's own order) starts it
// afresh: the ring drops the early batches as any new epoch does.
#pragma once
#include <cstdint>

namespace liftoff {

class NextEpochPrefetch {
 public:
  NextEpochPrefetch() = default;  // off
  explicit NextEpochPrefetch(bool enabled) : enabled_(enabled) {}
  // The epoch `current` is over: true when current + 1 is to begin now (the caller begins it).
  bool begin_after(int64_t current) {
    if (!enabled_ || early_ >= 0 || current < 0) return false;
    early_ = current + 1;
    return true;
  }
  // The next epoch began early and start_epoch() was not called yet: next() reports the epoch over.
  bool over() const { return early_ >= 0; }
  // start_epoch(epoch): true when that epoch began early (nothing left to do).
  bool take(int64_t epoch) {
    const bool same = early_ == epoch;
    early_ = -1;
    return same;
  }

 private:
  bool enabled_ = false;
  int64_t early_ = -1;  // the epoch begun early, -1: none
};

}  // namespace liftoff
