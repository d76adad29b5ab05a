#include "data/batch_ring.h"

#include <numeric>

#include "data/batch_iterator.h"
#include "runtime/random.h"

namespace liftoff {

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
