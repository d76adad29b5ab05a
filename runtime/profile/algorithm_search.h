// Time spent choosing algorithms on first use: each new convolution shape and direction runs cuDNN's search
// (legacy algorithms and graph-API engines, timed on the call's buffers), as PyTorch's cudnn.benchmark does.
// A one-off cost per process (or none, when a store on disk keeps the choices between runs), paid inside the
// first steps (and an evaluation's first batches), which the run's report names so a short run's slow start
// is explained. Process-wide totals; thread-safe.
#pragma once
#include <cstdint>
#include <string>

namespace liftoff {

struct AlgorithmSearchTotals {
  int64_t searches = 0;  // shape-and-direction searches finished
  double seconds = 0.0;  // their host wall time, summed (each ends synchronised with the device)
  int64_t restored = 0;  // choices restored from the on-disk store instead (ops/conv2d/algorithm_store.h)
  std::string store;     // that store's file ("" when none was used)
};

// Adds one finished search of `seconds`.
void record_algorithm_search(double seconds);
// Adds one choice restored from the store at `store_path` (no search ran).
void record_algorithm_restored(const std::string& store_path);
// Names the store a search's choice was written to.
void record_algorithm_store(const std::string& store_path);
// The totals so far in this process.
AlgorithmSearchTotals algorithm_search_totals();

}  // namespace liftoff
