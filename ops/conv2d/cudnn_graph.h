// conv2d on CUDA through cuDNN's graph (backend) API: one convolution direction as a one-operation graph,
// engine configurations from cuDNN's heuristics, the fastest of a few, timed on the call's own buffers, kept
// as the execution plan. It reaches engines the legacy API does not choose (on the H200, the legacy search
// picked non-tensor-core weight-gradient kernels for bf16 at 0.1-0.2 ms per ResNet-20 layer). cudnn_plans.cpp
// times the legacy algorithm the same way and keeps whichever is faster. Internal to conv2d's CUDA path.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "ops/conv2d/kernels.h"
#include "runtime/cuda/cudnn_backend.h"
#include "runtime/dtype.h"

namespace liftoff::cuda::conv_graph {

enum class Direction { forward, backward_data, backward_filter };
const char* direction_name(Direction d);

// The three buffers of one call. Forward: x, w in, y out. Backward data: w, y (= dy) in, x (= dx) out.
// Backward filter: x, y (= dy) in, w (= dw) out.
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
};

class GraphPlan;  // an execution plan with its descriptors (cudnn_graph.cpp)

// The graph's building blocks, for graphs built around a convolution (this file's, and benches that add
// operations to one, tools/bench/conv_bn_stats_bench.cpp). A finalized 4-D tensor of logical sizes
// (a, b, h, w) = (n, c, h, w) or (k, c, r, s), 16-byte aligned; channels_last orders memory with b innermost
// (NHWC / KRSC); is_virtual: an intermediate no buffer backs. f32, f16, bf16.
BackendDesc make_tensor(int64_t uid, DType dtype, int64_t a, int64_t b, int64_t h, int64_t w,
                        bool channels_last, bool is_virtual = false);
// g's convolution (cross-correlation, f32 accumulation; f32 data may use TF32), finalized.
BackendDesc make_convolution(const Conv2dShape& g);

struct SearchResult {
  std::shared_ptr<GraphPlan> plan;  // null when no engine configuration finalized or all were slower
  float plan_ms = 0.0f;             // the chosen plan's median time
  int candidates = 0;               // configurations that finalized and ran
  int config_index = -1;            // the chosen plan's position in cuDNN's heuristic list (for rebuild)
  std::string note;                 // why none was chosen, for LIFTOFF_CUDNN_LOG
};

// Builds the graph of one direction, times up to `max_candidates` heuristic configurations whose workspace
// fits the search's `scratch` on `buffers` (synchronizes: eager steps only), and returns the fastest when it
// beats `baseline_ms` (the legacy algorithm timed by time_ms; +inf to take any). Never throws for an engine
// that fails: it is skipped; the result says why nothing was chosen. beta = 1: the plans add their result
// into the output buffer (which then must hold data).
SearchResult search(Direction direction, cudnnHandle_t handle, int device, const Conv2dShape& g, DType dtype,
                    const Buffers& buffers, void* scratch, size_t scratch_bytes, float baseline_ms,
                    int max_candidates = 8, float beta = 0.0f);

// The plan `search` chose, made again without timing: the configuration at `config_index` of the same
// heuristic list, when it is still engine `engine` (the store's record, algorithm_store.h) and its workspace
// fits `max_workspace`; null otherwise (the caller searches). Never throws.
std::shared_ptr<GraphPlan> rebuild(Direction direction, cudnnHandle_t handle, const Conv2dShape& g,
                                   DType dtype, int config_index, int64_t engine, size_t max_workspace,
                                   int max_candidates = 8);
int64_t engine_of(const GraphPlan& plan);  // cuDNN's global engine index

// Median milliseconds of `run` on the device's compute stream: a warm-up run, one timed eager run, then (when
// that run did not already lose to `give_up_above_ms`, see cudnn_graph.cpp) seven timed rounds, three for
// runs over 0.25 ms. A candidate that lost returns its one eager time (larger than give_up_above_ms).
float time_ms(int device, const std::function<void()>& run,
              float give_up_above_ms = std::numeric_limits<float>::infinity());
// Whether time_ms replays its runs from a graph now (the warm-up before a capture, or
// LIFTOFF_CONV_TIMING=graph) rather than launching them one by one: choices timed one way are not the
// other's.
bool time_in_graphs();

size_t workspace_bytes(const GraphPlan& plan);
std::string describe(const GraphPlan& plan);  // "engine 12" (cuDNN's global engine index)
// Whether the plan can run on these buffers (they are 16-byte aligned, as the plan's tensors promised).
bool accepts(const Buffers& buffers);
// Enqueues the plan on the handle's stream (capturable).
void execute(cudnnHandle_t handle, GraphPlan& plan, const Buffers& buffers, void* workspace);

}  // namespace liftoff::cuda::conv_graph
