// Time spent choosing algorithms on first use: each new convolution shape and direction runs cuDNN's search
// (legacy algorithms and graph-API engines, timed on the call's buffers), as PyTorch's cudnn.benchmark does.
// A one-off cost per process, paid inside the first steps (and an evaluation's first batches), which the
// run's report names so a short run's slow start is explained. Process-wide totals; thread-safe.
#pragma once
#include <cstdint>

namespace liftoff {

struct AlgorithmSearchTotals {
  int64_t searches = 0;  // shape-and-direction searches finished
  double seconds = 0.0;  // their host wall time, summed (each ends synchronised with the device)
};

// Adds one finished search of `seconds`.
void record_algorithm_search(double seconds);
// The totals so far in this process.
AlgorithmSearchTotals algorithm_search_totals();

}  // namespace liftoff
