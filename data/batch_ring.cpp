#include "data/batch_ring.h"

#include <numeric>

#include "data/batch_iterator.h"
#include "runtime/config.h"
#include "runtime/random.h"

namespace liftoff {

const char* ring_state_name(RingSlot::State state) {
  switch (state) {
    case RingSlot::State::free:
      return "free";
    case RingSlot::State::filling:
      return "filling";
    case RingSlot::State::filled:
      return "filled";
    case RingSlot::State::decoding:
      return "decoding";
    case RingSlot::State::ready:
      return "ready";
  }
  return "?";
}

StallWatch stall_watch_from_settings(std::function<std::string()> details) {
  StallWatch watch;
  watch.period_seconds = config::get_double(config::Knob::loader_stall_s).value_or(60.0);
  watch.details = std::move(details);
  return watch;
}

std::vector<int64_t> epoch_sample_order(int64_t size, int64_t shard_size, bool shuffle, uint64_t seed,
                                        int64_t epoch, int rank, int world_size, bool even_shards) {
  std::vector<int64_t> order;
  if (shuffle) {
    Generator gen(shuffle_seed(seed, epoch));
    order = randperm(size, gen);
  } else {
    order.resize(static_cast<size_t>(size));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  if (world_size <= 1) return order;
  // Every rank computed the same order; keep positions rank, rank + W, ... (padded from the start when even
  // shards are asked for).
  const auto world = static_cast<size_t>(world_size);
  const size_t padded = even_shards ? static_cast<size_t>(shard_size) * world : order.size();
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(shard_size));
  for (size_t pos = static_cast<size_t>(rank); pos < padded; pos += world)
    shard.push_back(order[pos % order.size()]);
  return shard;
}

}  // namespace liftoff
