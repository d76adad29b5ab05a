#include "ops/conv2d/cudnn_graph.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"  // compute_stream
#include "runtime/cuda/cudnn_backend.h"
#include "runtime/cuda/event.h"
#include "runtime/error.h"
#include "runtime/graph.h"

namespace liftoff::cuda::conv_graph {

namespace {

constexpr int64_t kXid = 1, kWid = 2, kYid = 3;
constexpr int64_t kAlignment = 16;

using Desc = BackendDesc;

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw DTypeError(str_cat("conv2d (cuDNN graph API): dtype ", dtype_name(dtype),
                               " is not supported (f32, f16, bf16)"));
  }
}

// The graph of one direction and what it references (kept alive with the plan).
struct OperationGraph {
  Desc x, w, y, conv, op, graph;
};

// What differs between the directions' operations: the descriptor type and the names of its tensor,
// convolution and scaling attributes (x, w, y name the buffers as conv_graph::Buffers does).
struct OperationTraits {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationTraits operation_traits(Direction d) {
  switch (d) {
    case Direction::forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case Direction::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case Direction::backward_filter:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

// beta = 1 adds the result into the output's buffer (cuDNN reads it in the kernel's epilogue).
OperationGraph make_graph(Direction d, cudnnHandle_t handle, const Conv2dShape& g, DType dtype,
                          float beta = 0.0f) {
  const bool cl = g.channels_last;
  const OperationTraits a = operation_traits(d);
  OperationGraph og{
      make_tensor(kXid, dtype, g.n, g.c, g.h, g.w, cl),
      make_tensor(kWid, dtype, g.k, g.cg(), g.r, g.s, cl),  // C/groups channels: the graph infers groups
      make_tensor(kYid, dtype, g.n, g.k, g.oh, g.ow, cl),
      make_convolution(g),
      Desc(a.type),
      Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)};
  const float alpha = 1.0f;
  og.op.set_desc(a.x, og.x)
      .set_desc(a.w, og.w)
      .set_desc(a.y, og.y)
      .set_desc(a.conv, og.conv)
      .set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  og.op.finalize();
  cudnnBackendDescriptor_t op = og.op.get();
  og.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op)
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  og.graph.finalize();
  return og;
}

// Engines whose notes say they round inputs down or reduce in reduced precision are left out (PyTorch
// filters the same), as are those compiled at run time (seconds of start-up per shape).
bool acceptable_engine(const Desc& config, int64_t* global_index) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  *global_index = engine_global_index(config, &engine);
  const cudnnBackendDescriptor_t e = engine.get();
  int64_t count = 0;
  cudnnBackendNumericalNote_t numerical[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, numerical));
  for (int64_t i = 0; i < count; ++i) {
    if (numerical[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        numerical[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) {
      return false;
    }
  }
  cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, behavior));
  for (int64_t i = 0; i < count; ++i) {
    if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false;
  }
  return true;
}

}  // namespace

Desc make_tensor(int64_t uid, DType dtype, int64_t a, int64_t b, int64_t h, int64_t w, bool channels_last,
                 bool is_virtual) {
  const int64_t dims[4] = {a, b, h, w};
  int64_t strides[4];
  if (channels_last) {
    strides[0] = h * w * b;
    strides[1] = 1;
    strides[2] = w * b;
    strides[3] = b;
  } else {
    strides[0] = b * h * w;
    strides[1] = h * w;
    strides[2] = w;
    strides[3] = 1;
  }
  const cudnnDataType_t dt = data_type(dtype);
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
  if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  t.finalize();
  return t;
}

Desc make_convolution(const Conv2dShape& g) {
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;  // f16/bf16 accumulate in f32; f32 may use TF32
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const int64_t dilation[2] = {g.dilation, g.dilation};
  const int64_t stride[2] = {g.stride, g.stride};
  const int64_t padding[2] = {g.padding, g.padding};
  Desc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
  c.finalize();
  return c;
}

// An execution plan of `config` with its workspace size; none when cuDNN cannot finalize it for this
// shape or its workspace exceeds max_workspace.
std::optional<std::pair<Desc, size_t>> finalized_plan(cudnnHandle_t handle, const Desc& config,
                                                      size_t max_workspace) {
  Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
      .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  int64_t ws_bytes = 0, count = 0;
  LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                               CUDNN_TYPE_INT64, 1, &count, &ws_bytes));
  if (ws_bytes < 0 || static_cast<size_t>(ws_bytes) > max_workspace) return std::nullopt;
  return std::make_pair(std::move(plan), static_cast<size_t>(ws_bytes));
}

class GraphPlan {
 public:
  GraphPlan(std::shared_ptr<OperationGraph> graph, Desc config, Desc plan, size_t workspace, int64_t engine)
      : graph_(std::move(graph)),
        config_(std::move(config)),
        plan_(std::move(plan)),
        workspace_(workspace),
        engine_(engine) {}

  size_t workspace() const { return workspace_; }
  int64_t engine() const { return engine_; }

  void execute(cudnnHandle_t handle, const Buffers& b, void* ws) {
    // The variant pack is rebuilt only when the pointers change (the caching allocator mostly hands the
    // same blocks back step after step).
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pack_ || b.x != last_.x || b.w != last_.w || b.y != last_.y || ws != last_ws_) {
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      const int64_t uids[3] = {kXid, kWid, kYid};
      void* pointers[3] = {b.x, b.w, b.y};
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids)
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers)
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
      pack.finalize();
      pack_ = std::make_unique<Desc>(std::move(pack));
      last_ = b;
      last_ws_ = ws;
    }
    LIFTOFF_CUDNN_CHECK(cudnnBackendExecute(handle, plan_.get(), pack_->get()));
  }

 private:
  std::shared_ptr<OperationGraph> graph_;  // what the engine configuration was made for
  Desc config_;
  Desc plan_;
  size_t workspace_;
  int64_t engine_;
  std::mutex mutex_;
  std::unique_ptr<Desc> pack_;
  Buffers last_;
  void* last_ws_ = nullptr;
};

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::forward:
      return "forward";
    case Direction::backward_data:
      return "backward-data";
    case Direction::backward_filter:
      return "backward-filter";
  }
  return "?";
}

// Candidates are timed replayed from a graph during the warm-up before a capture (GraphWarmupScope), else
// launched one by one, as the steps that will run them do. LIFTOFF_CONV_TIMING=graph|eager forces either.
bool time_in_graphs() {
  static const int forced = [] {
    const std::string value = config::get_string(config::Knob::conv_timing).value_or("auto");
    if (value == "graph") return 1;
    if (value == "eager") return 0;
    LIFTOFF_CHECK(value.empty() || value == "auto", ValueError, "LIFTOFF_CONV_TIMING=\"", value,
                  "\" is not one of auto, graph, eager");
    return -1;
  }();
  return forced < 0 ? graph_warmup_active() : forced == 1;
}

namespace {

// `run` captured kRunsPerGraph times into one graph, instantiated; null when the work cannot be captured.
constexpr int kRunsPerGraph = 4;
struct CapturedRuns {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~CapturedRuns() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

bool capture_runs(cudaStream_t stream, const std::function<void()>& run, CapturedRuns* out) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool ran = true;
  try {
    for (int i = 0; i < kRunsPerGraph; ++i) run();
  } catch (const Error&) {
    ran = false;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &out->graph);
  if (!ran || ended != cudaSuccess || out->graph == nullptr ||
      cudaGraphInstantiate(&out->exec, out->graph, 0) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}
}  // namespace

float time_ms(int device, const std::function<void()>& run, float give_up_above_ms) {
  // Timed as it will run: a replayed training step launches an engine's kernels (and memsets) as graph
  // nodes, each costing its launch, so before a capture the candidates run the same way, several per graph;
  // eager steps pay the host's launch cost instead, which eager timing includes.
  cudaStream_t stream = compute_stream(device);
  run();  // first use: lazily loaded kernels, allocations
  Event start(true), end(true);
  start.record(stream);
  run();
  end.record(stream);
  end.synchronize();
  const float once_ms = Event::elapsed_ms(start, end);
  // A candidate twice as slow as the best so far (beyond what an eager launch can add) has lost: the 28 timed
  // runs that would confirm it were most of a search's time (ResNet-9's 23 searches took 2.1 s).
  if (once_ms > 2.0f * give_up_above_ms + 0.05f) return once_ms;
  CapturedRuns captured;
  const bool replay = time_in_graphs() && capture_runs(stream, run, &captured);
  std::vector<float> times;
  const int rounds = once_ms > 0.25f ? 3 : 7;  // long runs vary little; short ones need the median of more
  for (int i = 0; i < rounds; ++i) {
    start.record(stream);
    if (replay) {
      LIFTOFF_CUDA_CHECK(cudaGraphLaunch(captured.exec, stream));
    } else {
      run();
    }
    end.record(stream);
    end.synchronize();
    times.push_back(Event::elapsed_ms(start, end) / (replay ? kRunsPerGraph : 1));
  }
  std::nth_element(times.begin(), times.begin() + rounds / 2, times.end());
  return times[rounds / 2];
}

SearchResult search(Direction direction, cudnnHandle_t handle, int device, const Conv2dShape& g, DType dtype,
                    const Buffers& buffers, void* scratch, size_t scratch_bytes, float baseline_ms,
                    int max_candidates, float beta) {
  SearchResult result;
  if (!accepts(buffers)) {
    result.note = "buffers not 16-byte aligned";
    return result;
  }
  std::shared_ptr<OperationGraph> graph;
  std::vector<Desc> configs;
  try {
    graph = std::make_shared<OperationGraph>(make_graph(direction, handle, g, dtype, beta));
    configs = heuristic_engine_configs(graph->graph, CUDNN_HEUR_MODE_A, 4 * max_candidates);
  } catch (const Error& e) {
    result.note = str_cat("graph not built: ", e.what());
    return result;
  }
  if (configs.empty()) {
    result.note = "cuDNN's heuristics returned no engine";
    return result;
  }

  float best_ms = baseline_ms;
  for (size_t index = 0; index < configs.size(); ++index) {
    Desc& config = configs[index];
    if (result.candidates >= max_candidates) break;
    try {
      int64_t engine = -1;
      if (!acceptable_engine(config, &engine)) continue;
      auto plan = finalized_plan(handle, config, scratch_bytes);
      if (!plan) continue;  // not for this shape, or its workspace does not fit
      auto candidate =
          std::make_shared<GraphPlan>(graph, std::move(config), std::move(plan->first), plan->second, engine);
      const float ms = time_ms(
          device, [&] { candidate->execute(handle, buffers, scratch); }, best_ms);
      ++result.candidates;
      if (ms < best_ms) {
        best_ms = ms;
        result.plan = std::move(candidate);
        result.plan_ms = ms;
        result.config_index = static_cast<int>(index);
      }
    } catch (const Error& e) {
      // An engine that fails to run is skipped (a failed candidate leaves the stream usable).
      result.note = str_cat("an engine failed: ", e.what());
      cudaGetLastError();
    }
  }
  if (!result.plan && result.note.empty()) {
    result.note = result.candidates > 0 ? "no engine beat the legacy algorithm" : "no engine fit";
  }
  return result;
}

std::shared_ptr<GraphPlan> rebuild(Direction direction, cudnnHandle_t handle, const Conv2dShape& g,
                                   DType dtype, int config_index, int64_t engine, size_t max_workspace,
                                   int max_candidates) {
  try {
    auto graph = std::make_shared<OperationGraph>(make_graph(direction, handle, g, dtype));
    std::vector<Desc> configs = heuristic_engine_configs(graph->graph, CUDNN_HEUR_MODE_A, 4 * max_candidates);
    if (config_index < 0 || static_cast<size_t>(config_index) >= configs.size()) return nullptr;
    Desc& config = configs[static_cast<size_t>(config_index)];
    int64_t found_engine = -1;
    if (!acceptable_engine(config, &found_engine) || found_engine != engine) return nullptr;
    auto plan = finalized_plan(handle, config, max_workspace);
    if (!plan) return nullptr;
    return std::make_shared<GraphPlan>(graph, std::move(config), std::move(plan->first), plan->second,
                                       engine);
  } catch (const Error&) {
    return nullptr;
  }
}

size_t workspace_bytes(const GraphPlan& plan) {
  return plan.workspace();
}

int64_t engine_of(const GraphPlan& plan) {
  return plan.engine();
}

std::string describe(const GraphPlan& plan) {
  return str_cat("engine ", plan.engine());
}

bool accepts(const Buffers& b) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; };
  return aligned(b.x) && aligned(b.w) && aligned(b.y);
}

void execute(cudnnHandle_t handle, GraphPlan& plan, const Buffers& buffers, void* workspace) {
  plan.execute(handle, buffers, workspace);
}

}  // namespace liftoff::cuda::conv_graph
