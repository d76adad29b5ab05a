// The one kernel behind graph-safe random draws (runtime/random.h): before a captured graph is replayed, the
// current (seed, offset) of every generator it draws from goes into that generator's device state.
#pragma once
#include <cstdint>
#include <vector>

namespace liftoff::cuda {

struct GeneratorStateWrite {
  uint64_t* state;  // device memory: [seed, offset]
  uint64_t seed;
  uint64_t offset;
};

// Device memory for one generator's [seed, offset] (two u64) on `device`, straight from cudaMalloc, not from
// the caching allocator: the state is written outside every graph (before each replay) and read inside it,
// so it must never be a block that a graph's private pool also hands to the graph's own temporaries. (The
// first draw happens during a capture, when that pool holds blocks the captured step freed: a replay's
// temporaries then overwrote the state before dropout read it.) Relaxed capture allows the cudaMalloc.
uint64_t* allocate_generator_state(int device);
// Frees it (cudaFree waits for queued work that may still read it). Never throws.
void free_generator_state(uint64_t* state) noexcept;

// Queues the writes on `stream` (a cudaStream_t of `device`): the values travel as kernel parameters, so the
// host neither waits nor keeps a buffer alive.
void write_generator_states(int device, void* stream, const std::vector<GeneratorStateWrite>& writes);

}  // namespace liftoff::cuda
