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

// Queues the writes on `stream` (a cudaStream_t of `device`): the values travel as kernel parameters, so the
// host neither waits nor keeps a buffer alive.
void write_generator_states(int device, void* stream, const std::vector<GeneratorStateWrite>& writes);

}  // namespace liftoff::cuda
