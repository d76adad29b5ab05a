#include "ops/conv2d/cudnn_plans.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>

#include "ops/conv2d/algorithm_store.h"
#include "ops/conv2d/cudnn_plan_parts.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/determinism.h"
#include "runtime/error.h"
#include "runtime/profile/algorithm_search.h"
#include "runtime/storage.h"
#include "runtime/tensor.h"

namespace liftoff::cuda {

namespace conv_plans {
namespace {

// One device's plans are keyed by everything that changes the descriptors or the search's outcome; the
// direction is the second level (a plan holds the three directions, which share the tensor descriptors).
struct PlanKey {
  DType dtype;
  Layout layout;
  int64_t n, c, h, w, k, r, s, stride, padding, dilation, groups;
  bool deterministic;  // --deterministic plans keep only reproducible algorithms
  ConvEngines engines;
  bool operator<(const PlanKey& o) const {
    return std::tie(dtype, layout, n, c, h, w, k, r, s, stride, padding, dilation, groups, deterministic,
                    engines) < std::tie(o.dtype, o.layout, o.n, o.c, o.h, o.w, o.k, o.r, o.s, o.stride,
                                        o.padding, o.dilation, o.groups, o.deterministic, o.engines);
  }
};

// The process-wide engine setting (set_conv_engines; LIFTOFF_CONV_ENGINES at start) and graph-plan counter.
std::atomic<int>& engines_setting() {
  static std::atomic<int> setting{[] {
    const std::string value = config::get_string(config::Knob::conv_engines).value_or("auto");
    if (value.empty() || value == "auto") return static_cast<int>(ConvEngines::automatic);
    if (value == "legacy") return static_cast<int>(ConvEngines::legacy);
    if (value == "graph") return static_cast<int>(ConvEngines::graph);
    throw ValueError(str_cat("LIFTOFF_CONV_ENGINES=\"", value, "\" is not one of auto, legacy, graph"));
  }()};
  return setting;
}

std::atomic<int64_t>& graph_executions() {
  static std::atomic<int64_t> count{0};
  return count;
}
std::atomic<int64_t>& accumulated_executions() {
  static std::atomic<int64_t> count{0};
  return count;
}

// One device's plans, owned by its context (device_extension): created on first use of the device's
// convolutions, destroyed with the context. Plans are only added, so a Plan& stays valid for the cache's
// life.
class ConvPlanCache final : public DeviceExtension {
 public:
  // Calls fn(plan) with the cache locked (the plan is made on first use of the shape). Searches run inside,
  // so one device's searches never overlap; other devices' caches are independent.
  template <class Fn>
  void with_plan(DType dtype, const Conv2dShape& g, Fn&& fn) {
    const Layout layout = g.channels_last ? Layout::nhwc : Layout::nchw;
    const PlanKey key{
        dtype,         layout, g.n,      g.c,       g.h,        g.w,      g.k,
        g.r,           g.s,    g.stride, g.padding, g.dilation, g.groups, deterministic_algorithms(),
        conv_engines()};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make_plan(dtype, g, layout)).first;
    fn(*it->second);
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

  // The device's algorithm store (made on first use; null when LIFTOFF_CONV_CACHE=off). Called with the
  // cache locked (inside with_plan's fn).
  AlgorithmStore* store(int device) {
    if (!store_checked_) {
      store_checked_ = true;
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
        const std::string path = algorithm_store_path(str_cat(prop.name, " sm_", prop.major, prop.minor, " ",
                                                              prop.multiProcessorCount, " SMs cuDNN ",
                                                              static_cast<int64_t>(cudnnGetVersion())));
        if (!path.empty()) {
          const std::string profiler = cuda_profiler_evidence();
          const bool profiled = !profiler.empty();
          if (profiled) {
            std::fprintf(stderr,
                         "liftoff: a CUDA profiler is attached (%s): the convolution algorithm store %s is "
                         "read, but this run's searches are not written to it (timed under a profiler, they "
                         "would slow later runs)\n",
                         profiler.c_str(), path.c_str());
          }
          store_ = std::make_unique<AlgorithmStore>(path, /*keeps_new_choices=*/!profiled);
        }
      } else {
        cudaGetLastError();
      }
    }
    return store_.get();
  }

 private:
  std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  bool store_checked_ = false;
  std::unique_ptr<AlgorithmStore> store_;
};

// The search's scratch is its own allocation, returned as soon as the search ends: some algorithms ask for
// hundreds of MiB, and keeping that in the persistent workspace would hold it for the whole run (the
// persistent one grows only to what the chosen algorithms need). Shrinks when the memory is not there.
// 1 GiB: the strided CNN's first weight gradient at 512 px (C = 3, batch 128, bf16) needs 512.5 MiB for
// cuDNN's algorithm 1 (1.4 ms); under a 512 MiB cap it ran algorithm 0 (6.7 ms).
constexpr size_t kMaxSearchWorkspace = size_t{1024} << 20;
constexpr size_t kHalfSearchWorkspace = size_t{64} << 20;

class SearchWorkspace {
 public:
  SearchWorkspace(int device, size_t wanted, DType dtype) : bytes_(std::min(wanted, workspace_limit(dtype))) {
    // The search times candidates with host synchronisation: only in eager steps (graphs capture warm plans).
    check_not_capturing("A cuDNN algorithm search (first use of a convolution shape)");
    while (bytes_ > 0) {
      try {
        ptr_ = CachingAllocator::get().allocate(bytes_, device, compute_stream(device));
        return;
      } catch (const OutOfMemoryError&) {
        bytes_ = bytes_ > (size_t{1} << 20) ? bytes_ / 4 : 0;
      }
    }
  }
  ~SearchWorkspace() {
    if (ptr_ != nullptr) CachingAllocator::get().free(ptr_);
  }
  SearchWorkspace(const SearchWorkspace&) = delete;
  SearchWorkspace& operator=(const SearchWorkspace&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  // LIFTOFF_CUDNN_WORKSPACE_MB caps what any search or chosen algorithm may use. Default: 512 MiB, but 64 MiB
  // for f16, where the larger workspaces bought no speed on the H200 (ResNet-20, batch 256: 49,753 images/s
  // at 512 vs 55,134 at 64 in one call) and cost 56 MiB of peak memory (docs/perf.md).
  static size_t workspace_limit(DType dtype) {
    const std::optional<double> mb = config::get_double(config::Knob::cudnn_workspace_mb);
    if (mb) return static_cast<size_t>(*mb * 1024.0 * 1024.0);
    return dtype == DType::f16 ? kHalfSearchWorkspace : kMaxSearchWorkspace;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// LIFTOFF_CUDNN_LOG=1 prints every algorithm choice (one line per shape and direction) to stderr.
bool log_choices() {
  return *config::get_bool(config::Knob::cudnn_log);
}

std::string shape_text(const Conv2dShape& g, DType dtype) {
  return str_cat("input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w, "], weight [", g.k, ", ", g.cg(), ", ", g.r,
                 ", ", g.s, "], stride ", g.stride, ", padding ", g.padding, ", dilation ", g.dilation,
                 ", groups ", g.groups, ", ", dtype_name(dtype), g.channels_last ? ", NHWC" : "");
}

// Picks the fastest successful result (cuDNN sorts them by time) and gives its math type to `desc`.
template <class Perf, class Algo>
void take_best(const Perf* perf, int returned, size_t limit, cudnnConvolutionDescriptor_t desc,
               Choice<Algo>* choice, const char* direction, const Conv2dShape& g, DType dtype) {
  const bool deterministic = deterministic_algorithms();
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > limit) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionMathType(desc, perf[i].mathType));
    choice->algo = perf[i].algo;
    choice->workspace_bytes = perf[i].memory;
    choice->found = true;
    if (log_choices()) {
      // cudnnGet*_v7's guesses carry no time (cuDNN reports -1): say so rather than print it.
      const std::string timing = perf[i].time >= 0 ? str_cat(perf[i].time, " ms") : "cuDNN's guess, untimed";
      std::fprintf(stderr, "liftoff cudnn: %s %s: algo %d, %s, workspace %.1f MiB (cap %.1f MiB)\n",
                   direction, shape_text(g, dtype).c_str(), static_cast<int>(perf[i].algo), timing.c_str(),
                   static_cast<double>(perf[i].memory) / 1048576.0, static_cast<double>(limit) / 1048576.0);
    }
    return;
  }
  throw BackendError(str_cat("conv2d: cuDNN found no usable ", deterministic ? "deterministic " : "",
                             direction, " algorithm for ", shape_text(g, dtype)));
}

// The legacy API's search of direction D: the largest workspace any algorithm asks (capped by
// SearchWorkspace), then cudnnFind*AlgorithmEx on the call's buffers.
template <class D>
void find_legacy(cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g, const Descriptors& t,
                 DirectionPlan<typename D::Algo>& d, const Buffers& buffers) {
  size_t limit = 0;
  for (int a = 0; a < D::kAlgoCount; ++a) {
    size_t bytes = 0;
    if (D::workspace_size(handle, t, d.conv, static_cast<typename D::Algo>(a), &bytes) ==
        CUDNN_STATUS_SUCCESS) {
      limit = std::max(limit, bytes);
    }
  }
  const SearchWorkspace ws(device, limit, dtype);
  limit = ws.bytes();
  typename D::Perf perf[D::kAlgoCount];
  int returned = 0;
  D::find(handle, t, d.conv, buffers, &returned, perf, ws.get(), limit);
  take_best(perf, returned, limit, d.conv, &d.choice, conv_graph::direction_name(D::kDirection), g, dtype);
}

// accumulate: beta = 1, the result is added into the output buffer.
template <class D>
void run_legacy(cudnnHandle_t handle, DType dtype, const Descriptors& t,
                const DirectionPlan<typename D::Algo>& d, const Buffers& buffers, void* ws,
                bool accumulate = false) {
  D::execute(handle, scalar_one(dtype), accumulate ? scalar_one(dtype) : scalar_zero(dtype), t, d.conv,
             d.choice.algo, buffers, ws, d.choice.workspace_bytes);
}

// Whether graph_plan_for times the graph API's engines against the legacy choice. Grouped convolutions
// (depthwise included) go through it too: the graph's weight [K, C/groups, R, S] gives cuDNN the group count,
// and its engines include the specialised depthwise kernels the legacy API does not pick (MobileNetV2's
// depthwise layers took 3.9 ms of a 9.4 ms step with the legacy choices). Dilated ones stay on the legacy
// API: not validated on the GPU through the graph.
bool graph_engines_timed(const Conv2dShape& g, DType dtype, const Buffers& buffers) {
  return conv_engines() != ConvEngines::legacy && dtype != DType::f64 && !deterministic_algorithms() &&
         g.dilation == 1 && conv_graph::accepts(buffers);
}

// The legacy baseline when the graph API's engines are timed against it: cuDNN's first ranked guess within
// the cap, run once to prove it works (else the full search). cudnnFind*AlgorithmEx times every algorithm,
// slow ones included: ResNet-9's backward-data searches spent 170-350 ms each in it (1.5 s of a 2.05 s
// start-up) for a baseline the graph engines then beat in 16 of 17 directions.
template <class D>
void guess_legacy(cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g, const Descriptors& t,
                  DirectionPlan<typename D::Algo>& d, const Buffers& buffers) {
  typename D::Perf perf[D::kAlgoCount];
  int returned = 0;
  try {
    D::guess(handle, t, d.conv, &returned, perf);
    take_best(perf, returned, SearchWorkspace::workspace_limit(dtype), d.conv, &d.choice,
              conv_graph::direction_name(D::kDirection), g, dtype);
    const SearchWorkspace ws(device, d.choice.workspace_bytes, dtype);
    run_legacy<D>(handle, dtype, t, d, buffers, ws.get());
    return;
  } catch (const Error&) {
    cudaGetLastError();  // a guess that does not run: the full search decides
    d.choice = Choice<typename D::Algo>{};
  }
  find_legacy<D>(handle, device, dtype, g, t, d, buffers);
}

// The graph API's search scratch: the engines these convolutions get need a few MiB at most; a larger
// scratch would only raise the run's peak memory (it is returned right after the search). A
// LIFTOFF_CUDNN_WORKSPACE_MB the user set caps the graph API's engines too, above 64 MiB as well.
constexpr size_t kGraphSearchWorkspace = size_t{64} << 20;
size_t graph_search_workspace(DType dtype) {
  if (config::get_double(config::Knob::cudnn_workspace_mb)) return SearchWorkspace::workspace_limit(dtype);
  return std::min(kGraphSearchWorkspace, SearchWorkspace::workspace_limit(dtype));
}

// Times the legacy choice (run_legacy, given a workspace) and the graph API's engines on the call's buffers,
// and returns a graph plan that was faster (under ConvEngines::graph, any that runs); null keeps the legacy
// algorithm.
std::shared_ptr<conv_graph::GraphPlan> graph_plan_for(Direction direction, cudnnHandle_t handle, int device,
                                                      const Conv2dShape& g, DType dtype,
                                                      const Buffers& buffers, size_t legacy_bytes,
                                                      const std::function<void(void*)>& run_legacy,
                                                      int* config_index) {
  if (!graph_engines_timed(g, dtype, buffers)) return nullptr;
  const ConvEngines engines = conv_engines();
  const SearchWorkspace scratch(device, std::max(legacy_bytes, graph_search_workspace(dtype)), dtype);
  float legacy_ms = std::numeric_limits<float>::infinity();
  if (engines == ConvEngines::automatic && legacy_bytes <= scratch.bytes()) {
    legacy_ms = conv_graph::time_ms(device, [&] { run_legacy(scratch.get()); });
  }
  const conv_graph::SearchResult found = conv_graph::search(direction, handle, device, g, dtype, buffers,
                                                            scratch.get(), scratch.bytes(), legacy_ms);
  *config_index = found.config_index;
  if (log_choices()) {
    const std::string graph =
        found.plan ? str_cat(conv_graph::describe(*found.plan), " ", found.plan_ms, " ms, kept") : found.note;
    std::fprintf(stderr, "liftoff cudnn: %s %s: legacy %.3f ms; graph API (%d engines timed): %s\n",
                 conv_graph::direction_name(direction), shape_text(g, dtype).c_str(),
                 static_cast<double>(legacy_ms), found.candidates, graph.c_str());
  }
  return found.plan;
}

// Runs a graph plan when there is one and the buffers suit it; false: the caller runs the legacy algorithm.
bool run_graph_plan(conv_graph::GraphPlan* plan, cudnnHandle_t handle, int device, const Buffers& buffers) {
  if (!plan || !conv_graph::accepts(buffers)) return false;
  const size_t bytes = conv_graph::workspace_bytes(*plan);
  conv_graph::execute(handle, *plan, buffers, bytes > 0 ? workspace(device, bytes) : nullptr);
  graph_executions().fetch_add(1, std::memory_order_relaxed);
  return true;
}

// What one call runs, copied from its plan under the cache's lock.
template <class D>
struct Ready {
  Descriptors tensors;
  DirectionPlan<typename D::Algo> direction;
  AccumulateChoice accumulate;  // backward data's, for a call that accumulates
};
using AnyReady = std::variant<Ready<Forward>, Ready<BackwardData>, Ready<BackwardFilter>>;

// The store's record of a direction's choice: "legacy <algo> <math type> graph <heuristic index> <engine>"
// (index -1: the legacy algorithm runs).
template <class Algo>
std::string choice_text(const DirectionPlan<Algo>& d, int graph_index) {
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  LIFTOFF_CUDNN_CHECK(cudnnGetConvolutionMathType(d.conv, &math));
  return str_cat("legacy ", static_cast<int>(d.choice.algo), " ", static_cast<int>(math), " graph ",
                 d.choice.graph ? graph_index : -1, " ",
                 d.choice.graph ? conv_graph::engine_of(*d.choice.graph) : int64_t{-1});
}

// Makes the choice `text` records for direction D, checking it still applies (the algorithm's workspace
// within today's cap, the graph plan's engine at the same place in cuDNN's list); false: search instead.
template <class D>
bool restore(cudnnHandle_t handle, DType dtype, const Conv2dShape& g, Plan& plan, const std::string& text) {
  DirectionPlan<typename D::Algo>& d = D::of(plan);
  std::istringstream in(text);
  std::string legacy_word, graph_word;
  int algo = -1, math = -1, index = -1;
  int64_t engine = -1;
  if (!(in >> legacy_word >> algo >> math >> graph_word >> index >> engine) || legacy_word != "legacy" ||
      graph_word != "graph" || algo < 0 || algo >= D::kAlgoCount ||
      (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH &&
       math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && math != CUDNN_FMA_MATH)) {
    return false;
  }
  const auto chosen = static_cast<typename D::Algo>(algo);
  size_t bytes = 0;
  LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(math)));
  std::shared_ptr<conv_graph::GraphPlan> graph;
  bool ok = D::workspace_size(handle, plan.tensors, d.conv, chosen, &bytes) == CUDNN_STATUS_SUCCESS &&
            bytes <= SearchWorkspace::workspace_limit(dtype);
  if (ok && index >= 0) {
    const size_t graph_bytes = std::max(bytes, graph_search_workspace(dtype));
    graph = conv_graph::rebuild(D::kDirection, handle, g, dtype, index, engine, graph_bytes);
    ok = graph != nullptr;
  }
  if (!ok) {
    LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, initial_math(dtype)));
    return false;
  }
  d.choice.algo = chosen;
  d.choice.workspace_bytes = bytes;
  d.choice.graph = std::move(graph);
  d.choice.found = true;
  if (log_choices()) {
    std::fprintf(stderr, "liftoff cudnn: %s %s: restored from the store (%s)\n",
                 conv_graph::direction_name(D::kDirection), shape_text(g, dtype).c_str(), text.c_str());
  }
  return true;
}

// An output-sized temporary from the stream's cache (capturable; it goes back in stream order).
Tensor output_sized(const Conv2dShape& g, DType dtype, int device) {
  return Tensor::empty({g.n * g.c * g.h * g.w}, dtype, Device::cuda(device));
}

// The buffers a search may write: an output that holds data (a call that accumulates into it) is replaced by
// a scratch one of its size, kept in `scratch` for the search's duration.
Buffers searchable(const Buffers& buffers, bool output_holds_data, DType dtype, const Conv2dShape& g,
                   int device, Tensor* scratch) {
  if (!output_holds_data) return buffers;
  *scratch = output_sized(g, dtype, device);
  Buffers b = buffers;
  b.x = scratch->raw_data();  // backward data's output (the only direction that accumulates)
  return b;
}

// With the cache locked: on first use of direction D, the store's choice, else the search (legacy, then the
// graph API against it), whose choice the store then keeps. Under QuickTuningScope a shape the store does not
// know takes cuDNN's first guess instead, provisionally (not stored; searched on its first use outside).
template <class D>
Ready<D> prepare_direction(cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g, Plan& plan,
                           const Buffers& call_buffers, bool accumulate, AlgorithmStore* store) {
  DirectionPlan<typename D::Algo>& d = D::of(plan);
  const bool quick = quick_tuning_active();
  // A guess is searched on its first eager use outside the scope; inside a capture (where a search cannot
  // run) it keeps serving.
  if (d.choice.found && d.choice.provisional && !quick && !graph_capture_active()) {
    d.choice = Choice<typename D::Algo>{};
  }
  if (!d.choice.found) {
    const std::string key = store != nullptr ? store_key(dtype, g, D::kDirection) : std::string();
    const std::optional<std::string> kept = store != nullptr ? store->find(key) : std::nullopt;
    if (kept && restore<D>(handle, dtype, g, plan, *kept)) {
      record_algorithm_restored(store->path());
      return Ready<D>{plan.tensors, d, {}};
    }
    Tensor scratch;
    const Buffers buffers = searchable(call_buffers, accumulate, dtype, g, device, &scratch);
    if (quick) {
      guess_legacy<D>(handle, device, dtype, g, plan.tensors, d, buffers);
      d.choice.provisional = true;
      return Ready<D>{plan.tensors, d, {}};
    }
    using Clock = std::chrono::steady_clock;
    const auto began = Clock::now();
    if (graph_engines_timed(g, dtype, buffers)) {
      guess_legacy<D>(handle, device, dtype, g, plan.tensors, d, buffers);
    } else {
      find_legacy<D>(handle, device, dtype, g, plan.tensors, d, buffers);
    }
    const auto legacy_found = Clock::now();
    int graph_index = -1;
    d.choice.graph = graph_plan_for(
        D::kDirection, handle, device, g, dtype, buffers, d.choice.workspace_bytes,
        [&](void* scratch) { run_legacy<D>(handle, dtype, plan.tensors, d, buffers, scratch); },
        &graph_index);
    const auto ended = Clock::now();
    record_algorithm_search(std::chrono::duration<double>(ended - began).count());
    if (log_choices()) {
      std::fprintf(stderr, "liftoff cudnn: %s %s: searched in %.1f ms (legacy %.1f ms, graph API %.1f ms)\n",
                   conv_graph::direction_name(D::kDirection), shape_text(g, dtype).c_str(),
                   std::chrono::duration<double, std::milli>(ended - began).count(),
                   std::chrono::duration<double, std::milli>(legacy_found - began).count(),
                   std::chrono::duration<double, std::milli>(ended - legacy_found).count());
    }
    if (store != nullptr) {
      store->add(key, choice_text(d, graph_index));
      if (store->keeps_new_choices()) record_algorithm_store(store->path());
    }
  }
  return Ready<D>{plan.tensors, d, {}};
}

// The direction's own choice (graph plan or legacy algorithm), writing its output; legacy_accumulates: the
// legacy algorithm adds into it instead (beta = 1).
template <class D>
void enqueue_chosen(const Ready<D>& ready, cudnnHandle_t handle, int device, DType dtype,
                    const Buffers& buffers, bool legacy_accumulates = false) {
  if (!legacy_accumulates && run_graph_plan(ready.direction.choice.graph.get(), handle, device, buffers)) {
    return;
  }
  const size_t bytes = ready.direction.choice.workspace_bytes;
  run_legacy<D>(handle, dtype, ready.tensors, ready.direction, buffers,
                bytes ? workspace(device, bytes) : nullptr, legacy_accumulates);
}

// Backward data into `aside` (the output's size), then added into the output (Buffers::x) by the engine's
// own gradient sum (accumulate_into: one pass at the copy's bandwidth), as before the engine offered it.
template <class D>
void add_aside(const Ready<D>& ready, cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g,
               const Buffers& buffers, void* aside) {
  Buffers b = buffers;
  b.x = aside;
  enqueue_chosen(ready, handle, device, dtype, b);
  // Both buffers hold the output's elements in one dense order: added as flat vectors.
  const int64_t elements = g.n * g.c * g.h * g.w;
  const size_t bytes = static_cast<size_t>(elements) * dtype_size(dtype);
  const auto flat = [&](void* data) {
    return Tensor::from_blob(Storage::wrap(data, bytes, Device::cuda(device), nullptr), {elements}, dtype);
  };
  accumulate_into(flat(buffers.x), flat(aside));
}

template <class D>
void enqueue(const Ready<D>& ready, cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g,
             const Buffers& buffers, bool accumulate) {
  if (!accumulate) {
    enqueue_chosen(ready, handle, device, dtype, buffers);
    return;
  }
  accumulated_executions().fetch_add(1, std::memory_order_relaxed);
  using Way = AccumulateChoice::Way;
  const AccumulateChoice& a = ready.accumulate;
  if (a.way == Way::graph && run_graph_plan(a.graph.get(), handle, device, buffers)) return;
  if (a.way == Way::legacy) {
    enqueue_chosen(ready, handle, device, dtype, buffers, /*legacy_accumulates=*/true);
    return;
  }
  // Also before a choice is made (a first use inside a capture).
  add_aside(ready, handle, device, dtype, g, buffers, output_sized(g, dtype, device).raw_data());
}

// Times the ways of adding this shape's input gradient into one already there (AccumulateChoice) on the
// call's operands and a zeroed stand-in for the output; synchronizes (eager steps only).
template <class D>
AccumulateChoice choose_accumulate(cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g,
                                   const Ready<D>& ready, const Buffers& buffers) {
  using Way = AccumulateChoice::Way;
  const Tensor existing = output_sized(g, dtype, device), aside = output_sized(g, dtype, device);
  existing.zero_();
  Buffers b = buffers;
  b.x = existing.raw_data();
  AccumulateChoice best{Way::aside, nullptr};
  const float aside_ms =
      conv_graph::time_ms(device, [&] { add_aside(ready, handle, device, dtype, g, b, aside.raw_data()); });
  float best_ms = aside_ms;
  const float legacy_ms = conv_graph::time_ms(
      device, [&] { enqueue_chosen(ready, handle, device, dtype, b, /*legacy_accumulates=*/true); }, best_ms);
  if (legacy_ms < best_ms) {
    best = {Way::legacy, nullptr};
    best_ms = legacy_ms;
  }
  conv_graph::SearchResult found;
  if (graph_engines_timed(g, dtype, b)) {
    const SearchWorkspace scratch(device, graph_search_workspace(dtype), dtype);
    found = conv_graph::search(D::kDirection, handle, device, g, dtype, b, scratch.get(), scratch.bytes(),
                               best_ms,
                               /*max_candidates=*/8, /*beta=*/1.0f);
    if (found.plan) {
      best = {Way::graph, found.plan};
      best_ms = found.plan_ms;
    }
  }
  if (log_choices()) {
    const char* names[] = {"unset", "a graph plan with beta = 1", "the legacy algorithm with beta = 1",
                           "aside"};
    std::fprintf(stderr,
                 "liftoff cudnn: %s %s adding into its output: aside %.3f ms, legacy beta = 1 %.3f ms, graph "
                 "API beta = 1 (%d engines timed) %s; kept %s (%.3f ms)\n",
                 conv_graph::direction_name(D::kDirection), shape_text(g, dtype).c_str(),
                 static_cast<double>(aside_ms), static_cast<double>(legacy_ms), found.candidates,
                 found.plan ? conv_graph::describe(*found.plan).c_str() : found.note.c_str(),
                 names[static_cast<int>(best.way)], static_cast<double>(best_ms));
  }
  return best;
}

template <class D>
Ready<D> prepare(cudnnHandle_t handle, int device, DType dtype, const Conv2dShape& g, Plan& plan,
                 const Buffers& call_buffers, bool accumulate, AlgorithmStore* store) {
  Ready<D> ready = prepare_direction<D>(handle, device, dtype, g, plan, call_buffers, accumulate, store);
  if constexpr (std::is_same_v<D, BackwardData>) {
    // Chosen on the first accumulating call outside a capture or quick tuning (until then: aside).
    if (accumulate && plan.accumulate.way == AccumulateChoice::Way::unset && !graph_capture_active() &&
        !quick_tuning_active()) {
      plan.accumulate = choose_accumulate<D>(handle, device, dtype, g, ready, call_buffers);
    }
    ready.accumulate = plan.accumulate;
  }
  return ready;
}

template <class Fn>
AnyReady with_traits(Direction direction, Fn&& fn) {
  switch (direction) {
    case Direction::forward:
      return fn(Forward{});
    case Direction::backward_data:
      return fn(BackwardData{});
    case Direction::backward_filter:
      return fn(BackwardFilter{});
  }
  throw ValueError("conv2d (CUDA): internal: unknown convolution direction");
}

}  // namespace

std::string store_key(DType dtype, const Conv2dShape& g, Direction direction) {
  return str_cat(dtype_name(dtype), g.channels_last ? " nhwc " : " nchw ", g.n, " ", g.c, " ", g.h, " ", g.w,
                 " ", g.k, " ", g.r, " ", g.s, " s", g.stride, " p", g.padding, " d", g.dilation, " g",
                 g.groups, deterministic_algorithms() ? " deterministic " : " ", "engines ",
                 static_cast<int>(conv_engines()), " ", conv_graph::direction_name(direction),
                 conv_graph::time_in_graphs() ? " timed-in-graphs" : " timed-eagerly");
}

void run(int device, DType dtype, const Conv2dShape& g, const Call* calls, size_t count) {
  std::array<AnyReady, 3> ready;
  LIFTOFF_CHECK(count <= ready.size(), ValueError, "conv2d (CUDA): internal: ", count,
                " convolutions in one run (at most 3)");
  for (size_t i = 0; i < count; ++i) {
    LIFTOFF_CHECK(!calls[i].accumulate || calls[i].direction == Direction::backward_data, ValueError,
                  "conv2d (CUDA): internal: only the input gradient adds into its output");
  }
  cudnnHandle_t handle = cudnn_handle(device);
  ConvPlanCache& cache = device_extension<ConvPlanCache>(device);
  cache.with_plan(dtype, g, [&](Plan& plan) {
    for (size_t i = 0; i < count; ++i) {
      ready[i] = with_traits(calls[i].direction, [&](auto traits) -> AnyReady {
        return prepare<decltype(traits)>(handle, device, dtype, g, plan, calls[i].buffers,
                                         calls[i].accumulate, cache.store(device));
      });
    }
  });
  for (size_t i = 0; i < count; ++i) {
    std::visit(
        [&](const auto& r) { enqueue(r, handle, device, dtype, g, calls[i].buffers, calls[i].accumulate); },
        ready[i]);
  }
}

}  // namespace conv_plans

void set_conv_engines(ConvEngines engines) {
  conv_plans::engines_setting().store(static_cast<int>(engines), std::memory_order_relaxed);
}

ConvEngines conv_engines() {
  return static_cast<ConvEngines>(conv_plans::engines_setting().load(std::memory_order_relaxed));
}

int64_t conv_graph_executions() {
  return conv_plans::graph_executions().load(std::memory_order_relaxed);
}

int64_t conv_accumulated_input_gradients() {
  return conv_plans::accumulated_executions().load(std::memory_order_relaxed);
}

int64_t conv_plan_count(int device) {
  return static_cast<int64_t>(device_extension<conv_plans::ConvPlanCache>(device).size());
}

}  // namespace liftoff::cuda
