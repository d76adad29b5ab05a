// Captures one call of fn into a CUDA graph (the capture is aborted if fn throws) and returns what fn
// returned: the tensors the graph writes at each replay. For GPU tests that compare a replay with eager runs.
#pragma once
#include <utility>

#include "runtime/graph.h"

namespace liftoff::testing {

template <class Fn>
auto capture_into(CudaGraph& graph, Fn&& fn) {
  graph.begin_capture();
  decltype(fn()) out;
  try {
    out = std::forward<Fn>(fn)();
  } catch (...) {
    graph.abort_capture();
    throw;
  }
  graph.end_capture();
  return out;
}

}  // namespace liftoff::testing
