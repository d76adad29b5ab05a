// BatchRing: the ordered ring of batch slots both prefetching loaders use (DataLoader, DecodeLoader). Batch b
// of an epoch lives in slot b % size. Producers claim batches in order once their slot is free; each loader
// moves its slot through its own stages (filling, filled, decoding); the consumer takes batches in order once
// ready, whatever the producers' timing, and releases the slot for batch b + size. start_epoch() begins a
// new generation: finished batches of the old one are dropped at once, and a slot a thread is still working
// on is dropped by that thread when it hands it back (finish() sees the generation changed).
//
// One mutex guards every slot's header (state, batch, generation, epoch, error) and the counters; a slot's
// payload belongs to the thread that moved it into a working state (filling, decoding) until it hands it on.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace liftoff {

struct RingSlot {
  // free -> filling (a producer) -> [filled -> decoding (a decode lane) ->] ready -> free (the consumer)
  enum class State { free, filling, filled, decoding, ready };
  State state = State::free;
  int64_t batch = -1;
  uint64_t generation = 0;
  int64_t epoch = 0;
  std::exception_ptr error;  // carried to the consumer, rethrown by next() for this batch
};

// The sample order of an epoch on one rank, as every loader computes it: the permutation of (seed, epoch)
// (or 0..size-1), then positions rank, rank + W, ... (padded from the start with even shards).
std::vector<int64_t> epoch_sample_order(int64_t size, int64_t shard_size, bool shuffle, uint64_t seed,
                                        int64_t epoch, int rank, int world_size, bool even_shards);

const char* ring_state_name(RingSlot::State state);

// A consumer waiting this long for one batch has the ring's state printed to stderr (again each period it
// keeps waiting): a stuck loader says where it stopped instead of hanging silently. `details` (called under
// the ring's lock) adds the loader's own state: its workers' cursors, decode lanes.
struct StallWatch {
  double period_seconds = 0.0;  // <= 0: off
  std::function<std::string()> details;
};

// The watch LIFTOFF_LOADER_STALL_S asks for (default every 60 s).
StallWatch stall_watch_from_settings(std::function<std::string()> details = {});

template <class Slot>  // Slot derives from RingSlot
class BatchRing {
 public:
  using State = RingSlot::State;
  using Lock = std::unique_lock<std::mutex>;

  explicit BatchRing(int size) {
    slots_.reserve(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) slots_.push_back(std::make_unique<Slot>());
  }

  std::mutex& mutex() const { return mutex_; }
  int size() const { return static_cast<int>(slots_.size()); }
  Slot& slot_at(int i) { return *slots_[static_cast<size_t>(i)]; }
  const Slot& slot_at(int i) const { return *slots_[static_cast<size_t>(i)]; }
  Slot& slot_of(int64_t batch) { return *slots_[static_cast<size_t>(batch % size())]; }
  const Slot& slot_of(int64_t batch) const { return *slots_[static_cast<size_t>(batch % size())]; }

  // Under the lock. ---------------------------------------------------------------------------------------
  bool stopped() const { return stop_; }
  uint64_t generation() const { return generation_; }
  int64_t epoch() const { return epoch_; }
  int64_t batches() const { return batches_; }
  int64_t step() const { return step_; }
  int64_t next_claim() const { return next_claim_; }
  // The next batch in order can be claimed: its slot was released by the consumer.
  bool claimable() const {
    return !stop_ && next_claim_ < batches_ && slot_of(next_claim_).state == State::free;
  }
  // Claims the next batch (claimable() must hold) and moves its slot to `filling`.
  Slot& claim() {
    const int64_t b = next_claim_++;
    Slot& slot = slot_of(b);
    slot.state = State::filling;
    slot.batch = b;
    slot.generation = generation_;
    slot.epoch = epoch_;
    slot.error = nullptr;
    return slot;
  }
  // The slot holds batch `batch` of the current generation in `state`.
  bool holds(const Slot& slot, int64_t batch, State state) const {
    return slot.state == state && slot.batch == batch && slot.generation == generation_;
  }
  // A working thread hands its slot on: dropped (free) when its generation is over or the ring stopped,
  // otherwise moved to `next` with `error`. False when dropped.
  bool hand_on(Slot& slot, State next, std::exception_ptr error) {
    if (slot.generation != generation_ || stop_) {
      release(slot);
      work_cv.notify_all();
      return false;
    }
    slot.error = std::move(error);
    slot.state = next;
    if (next == State::ready) ready_cv.notify_all();
    stage_cv.notify_all();
    return true;
  }
  void release(Slot& slot) {
    slot.state = State::free;
    slot.batch = -1;
    slot.error = nullptr;
  }

  // Locking. ----------------------------------------------------------------------------------------------
  // A new generation of `batches` batches: finished work of the old one is dropped. under_lock() runs with
  // the lock held (the loader rewinds its own cursors there).
  template <class Fn>
  void start_epoch(int64_t epoch, int64_t batches, Fn&& under_lock) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      under_lock();
      ++generation_;
      epoch_ = epoch;
      batches_ = batches;
      step_ = next_claim_ = 0;
      for (auto& slot : slots_) {
        if (slot->state == State::ready || slot->state == State::filled) release(*slot);
      }
    }
    work_cv.notify_all();
    stage_cv.notify_all();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv.notify_all();
    stage_cv.notify_all();
    ready_cv.notify_all();
  }
  // The consumer: the slot of the next batch once ready (nullptr when the epoch is over); adds the time it
  // blocked to *wait_seconds. Rethrows the batch's error (the batch stays, so a retry rethrows it).
  Slot* wait_ready(double* wait_seconds, const StallWatch& watch = {}) {
    Lock lock(mutex_);
    if (step_ >= batches_) return nullptr;
    Slot& slot = slot_of(step_);
    const auto start = std::chrono::steady_clock::now();
    const auto ready = [&] { return holds(slot, step_, State::ready); };
    if (watch.period_seconds > 0) {
      const std::chrono::duration<double> period(watch.period_seconds);
      for (int reports = 1; !ready_cv.wait_until(lock, start + reports * period, ready); ++reports)
        report_stall(reports * watch.period_seconds, watch);
    } else {
      ready_cv.wait(lock, ready);
    }
    *wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (slot.error) std::rethrow_exception(slot.error);
    return &slot;
  }
  // The consumer is done with the current batch: its slot is free for batch step + size.
  void consume(Slot& slot) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      release(slot);
      ++step_;
    }
    work_cv.notify_all();
  }

  // Under the lock: the consumer's position, the claims and every slot's header, one line.
  std::string describe_locked() const {
    std::string text = "epoch " + std::to_string(epoch_) + " (generation " + std::to_string(generation_) +
                       "): consumer at batch " + std::to_string(step_) + " of " + std::to_string(batches_) +
                       ", next claim " + std::to_string(next_claim_) + (stop_ ? ", stopped" : "") +
                       "; slots:";
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = *slots_[i];
      text += " [" + std::to_string(i) + "] " + ring_state_name(s.state);
      if (s.state != State::free) {
        text += " b" + std::to_string(s.batch) + (s.generation == generation_ ? "" : " (old generation)");
        if (s.error) text += " (error)";
      }
    }
    return text;
  }

  std::condition_variable work_cv;   // producers: a batch became claimable (or work appeared)
  std::condition_variable stage_cv;  // later stages (decode lanes): a slot moved on
  std::condition_variable ready_cv;  // the consumer: a batch became ready

 private:
  void report_stall(double waited_seconds, const StallWatch& watch) const {
    char waited[32];
    std::snprintf(waited, sizeof waited, "%g", waited_seconds);
    std::string text =
        "liftoff loader: waited " + std::string(waited) + " s for a batch; " + describe_locked();
    if (watch.details) text += "\n  " + watch.details();
    std::fprintf(stderr,
                 "%s\n  (LIFTOFF_LOADER_STALL_S sets this report's period; kill -USR1 <pid> of train "
                 "prints every thread's stack)\n",
                 text.c_str());
    std::fflush(stderr);
  }

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int64_t epoch_ = -1, batches_ = 0;
  int64_t step_ = 0;        // the next batch the consumer takes
  int64_t next_claim_ = 0;  // the next batch a producer may claim
};

}  // namespace liftoff
