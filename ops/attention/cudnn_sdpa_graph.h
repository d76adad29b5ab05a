// The operation graphs of cuDNN's fused flash attention (internal to cudnn_sdpa.cpp), written with the raw
// backend descriptors in the form cuDNN's runtime fusion engine matches as SDPA (the pattern
// cudnn-frontend's SDPA nodes lower to for cuDNN 9.x before its unified softmax/band-mask operations):
//   forward:  S = Q K^T (f32), S *= scale, [causal: S = select(row >= col, S, -inf)], M = rowmax S,
//             E = exp(S - M), Z = rowsum E, stats = M + log Z, P = E / Z (cast to the io dtype), O = P V
//   backward: D = rowsum(dO * O), S as above, P = exp(S * scale - stats) [causal masked], dV = P^T dO,
//             dS = P * (dO V^T - D) * scale, dK = dS^T Q, dQ = dS K (accumulated in f32, then cast)
// Tensors are 4-D [b, h, rows, d]; q, k, v keep their callers' strides; o, dO, dQ, dK, dV are dense.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace liftoff::cuda::sdpa {

// One attention problem as cuDNN sees it. Strides in elements of [b, h, rows, d]; o, dO and stats
// ([b, h, l, 1], f32) are dense, as are the gradients.
struct Problem {
  DType dtype = DType::bf16;
  int64_t b = 1, h = 1, l = 0, s = 0, d = 0;
  int64_t q_strides[4] = {}, k_strides[4] = {}, v_strides[4] = {};
  bool causal = false;
  double scale = 1.0;
};

enum class Direction { forward, backward };
const char* direction_name(Direction direction);

// The unique ids of the tensors a call binds (the graphs' own scalars and virtual tensors use others).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kGradO,
  kGradQ,
  kGradK,
  kGradV,
  kSoftmaxSum,  // backward scratch: rowsum(dO * O), f32 [b, h, l, 1]
  kGradQAccum,  // backward scratch: dQ in f32 [b, h, l, d]
};

struct Binding {
  int64_t uid;
  void* data;
};

class Plan;  // a finalized execution plan with the graph and the scalars it references

struct BuildResult {
  std::shared_ptr<Plan> plan;  // null when no engine configuration finalized
  std::string error;           // why (cuDNN's own messages), when null
};
// Builds the graph of one direction, asks cuDNN's heuristics (mode A, then the fallback list) for engine
// configurations and keeps the first that finalizes. Never throws for a graph or engine cuDNN rejects.
BuildResult build_plan(Direction direction, cudnnHandle_t handle, const Problem& problem);

size_t workspace_bytes(const Plan& plan);
std::string describe(const Plan& plan);  // "engine 8, workspace 0 B"
// Enqueues the plan on the handle's stream (capturable): `bindings` are the call's tensors (every uid of
// the direction: q, k, v, o, stats, and dO, dQ, dK, dV and the two scratch tensors backward).
void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<Binding>& bindings, void* workspace);

}  // namespace liftoff::cuda::sdpa
