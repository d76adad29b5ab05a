// CUDA conv2d through cuDNN. Per shape (device, dtype, layout, geometry) a plan holds the legacy API's
// descriptors and, found once with cudnnFind*AlgorithmEx (PyTorch's cudnn.benchmark), the algorithm,
// workspace size and math type of each direction; then, unless turned off, the graph API's engines for the
// same direction are timed against it (cudnn_graph.h) and the faster is kept. The searches synchronize;
// every later call only enqueues.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "ops/conv2d/cudnn_graph.h"
#include "ops/conv2d/kernels.h"
#include "runtime/config.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn_loader.h"
#include "runtime/cuda/cuda_types.cuh"
#include "runtime/determinism.h"
#include "runtime/graph.h"

namespace liftoff::cuda {

namespace {

// nhwc: y is channels-last (the channel is the innermost index).
template <class T>
__global__ void add_bias_kernel(T* y, const T* bias, int64_t n, int64_t plane, int64_t channels, bool nhwc) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const int64_t ch = nhwc ? i % channels : (i / plane) % channels;
    y[i] = convert<T>(convert<acc_t<T>>(y[i]) + convert<acc_t<T>>(bias[ch]));
  }
}

// gb[k] = sum over images and pixels of gy[:, k], in two deterministic passes: each channel's images*plane
// values are cut into `chunks` equal ranges, one block per (range, channel) writes its partial sum, then one
// block per channel adds its partials in range order. (One block per channel left a 32-channel layer at 224
// px with 32 busy blocks: 11.9 of 41.7 ms per step on the H200.)
template <class T>
__global__ void bias_grad_partial_kernel(const T* gy, acc_t<T>* partials, int64_t images, int64_t channels,
                                         int64_t plane, int64_t chunks, bool nhwc) {
  using A = acc_t<T>;
  __shared__ A partial[kBlock];
  const int64_t ch = blockIdx.y;
  const int64_t chunk = blockIdx.x;
  const int64_t count = images * plane;
  const int64_t per_chunk = (count + chunks - 1) / chunks;
  const int64_t begin = chunk * per_chunk;
  const int64_t end = begin + per_chunk < count ? begin + per_chunk : count;
  A sum = A(0);
  if (nhwc) {
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) sum += convert<A>(gy[j * channels + ch]);
  } else {
    // Walk whole planes (contiguous runs) so threads read neighbouring values and skip most divisions.
    int64_t img = begin / plane;
    int64_t pix = begin - img * plane;
    int64_t j = begin;
    while (j < end) {
      const int64_t run = (plane - pix) < (end - j) ? (plane - pix) : (end - j);
      const T* row = gy + (img * channels + ch) * plane + pix;
      for (int64_t t = threadIdx.x; t < run; t += blockDim.x) sum += convert<A>(row[t]);
      j += run;
      ++img;
      pix = 0;
    }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int offset = kBlock / 2; offset > 0; offset >>= 1) {
    if (threadIdx.x < offset) partial[threadIdx.x] += partial[threadIdx.x + offset];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[ch * chunks + chunk] = partial[0];
}

template <class T>
__global__ void bias_grad_finish_kernel(const acc_t<T>* partials, T* gb, int64_t channels, int64_t chunks) {
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= channels) return;
  acc_t<T> sum = acc_t<T>(0);
  for (int64_t c = 0; c < chunks; ++c) sum += partials[ch * chunks + c];
  gb[ch] = convert<T>(sum);
}

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw DTypeError(
          str_cat("conv2d: dtype ", dtype_name(dtype), " is not supported on CUDA (f32, f64, f16, bf16)"));
  }
}

// f16/bf16 accumulate in f32 on tensor cores; f32 may use TF32 (cuDNN's default math, as PyTorch's default).
cudnnDataType_t compute_dtype(DType dtype) {
  return dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}
cudnnMathType_t initial_math(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

// alpha/beta are double for f64 data, float otherwise.
const void* scalar_one(DType dtype) {
  static const float one_f = 1.0f;
  static const double one_d = 1.0;
  return dtype == DType::f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
}
const void* scalar_zero(DType dtype) {
  static const float zero_f = 0.0f;
  static const double zero_d = 0.0;
  return dtype == DType::f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
}

// The tensors' layout: NCHW (filters KCRS), or NHWC (filters KRSC: cuDNN's tensor-core convolutions want the
// filter in the activations' layout) when the front passes channels-last tensors.
enum class Layout { nchw, nhwc };

Layout layout_of(const Conv2dShape& g) {
  return g.channels_last ? Layout::nhwc : Layout::nchw;
}

struct PlanKey {
  int device;
  DType dtype;
  Layout layout;
  int64_t n, c, h, w, k, r, s, stride, padding, dilation, groups;
  bool deterministic;  // --deterministic plans keep only reproducible algorithms
  ConvEngines engines;
  bool operator<(const PlanKey& o) const {
    return std::tie(device, dtype, layout, n, c, h, w, k, r, s, stride, padding, dilation, groups,
                    deterministic, engines) < std::tie(o.device, o.dtype, o.layout, o.n, o.c, o.h, o.w, o.k,
                                                       o.r, o.s, o.stride, o.padding, o.dilation, o.groups,
                                                       o.deterministic, o.engines);
  }
};

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

// One chosen algorithm of one direction.
template <class Algo>
struct Choice {
  bool found = false;
  Algo algo{};
  size_t workspace_bytes = 0;
};

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // One convolution descriptor per direction: each carries the math type its chosen algorithm was timed with.
  cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr, bwd_filter = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> fwd_choice;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data_choice;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter_choice;
  // Graph-API plans that beat the legacy choice (null: the legacy algorithm runs).
  std::shared_ptr<conv_graph::GraphPlan> fwd_graph, bwd_data_graph, bwd_filter_graph;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Best effort: a destructor must not throw.
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (fwd) cudnnDestroyConvolutionDescriptor(fwd);
    if (bwd_data) cudnnDestroyConvolutionDescriptor(bwd_data);
    if (bwd_filter) cudnnDestroyConvolutionDescriptor(bwd_filter);
  }
};

std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}
// Leaked on purpose (as the device contexts): plans must outlive static destructors that may still run convs.
std::map<PlanKey, std::unique_ptr<Plan>>& plans() {
  static auto* cache = new std::map<PlanKey, std::unique_ptr<Plan>>();
  return *cache;
}

int as_int(int64_t value, const Conv2dShape& g) {
  LIFTOFF_CHECK(value <= INT_MAX, ShapeError, "conv2d: input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w,
                "] with weight [", g.k, ", ", g.cg(), ", ", g.r, ", ", g.s,
                "] exceeds cuDNN's 32-bit sizes; split the batch");
  return static_cast<int>(value);
}

// cuDNN is opened at run time (runtime/cuda/cudnn_loader.cpp forwards the functions the runtime uses); the
// group count is resolved here, by name, until the loader's list carries it.
cudnnStatus_t set_group_count(cudnnConvolutionDescriptor_t desc, int groups) {
  using Fn = cudnnStatus_t (*)(cudnnConvolutionDescriptor_t, int);
  static const auto fn = reinterpret_cast<Fn>(cudnn_symbol("cudnnSetConvolutionGroupCount"));
  return fn(desc, groups);
}

void make_conv_descriptor(cudnnConvolutionDescriptor_t* desc, const Conv2dShape& g, DType dtype) {
  LIFTOFF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
  LIFTOFF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      *desc, as_int(g.padding, g), as_int(g.padding, g), as_int(g.stride, g), as_int(g.stride, g),
      as_int(g.dilation, g), as_int(g.dilation, g), CUDNN_CROSS_CORRELATION, compute_dtype(dtype)));
  LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionMathType(*desc, initial_math(dtype)));
  if (g.groups != 1) LIFTOFF_CUDNN_CHECK(set_group_count(*desc, as_int(g.groups, g)));
}

// Called with plans_mutex() held.
Plan& plan_for(int device, DType dtype, const Conv2dShape& g) {
  const Layout layout = layout_of(g);
  const PlanKey key{device,        dtype,     layout,     g.n,      g.c,
                    g.h,           g.w,       g.k,        g.r,      g.s,
                    g.stride,      g.padding, g.dilation, g.groups, deterministic_algorithms(),
                    conv_engines()};
  auto& cache = plans();
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  as_int(g.n * g.c * g.h * g.w, g);
  as_int(g.n * g.k * g.oh * g.ow, g);
  as_int(g.k * g.cg() * g.r * g.s, g);
  auto plan = std::make_unique<Plan>();
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  // Sizes are given as (n, c, h, w) in both formats; the format says how memory is ordered.
  const cudnnTensorFormat_t format = layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  LIFTOFF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
  LIFTOFF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, format, dt, as_int(g.n, g), as_int(g.c, g),
                                                 as_int(g.h, g), as_int(g.w, g)));
  LIFTOFF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
  LIFTOFF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, format, dt, as_int(g.n, g), as_int(g.k, g),
                                                 as_int(g.oh, g), as_int(g.ow, g)));
  LIFTOFF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  // A grouped filter is [K, C/groups, R, S]; the group count is on the convolution descriptors.
  LIFTOFF_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, dt, format, as_int(g.k, g), as_int(g.cg(), g),
                                                 as_int(g.r, g), as_int(g.s, g)));
  make_conv_descriptor(&plan->fwd, g, dtype);
  make_conv_descriptor(&plan->bwd_data, g, dtype);
  make_conv_descriptor(&plan->bwd_filter, g, dtype);
  int dims[4] = {0, 0, 0, 0};
  LIFTOFF_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->fwd, plan->x, plan->w, &dims[0], &dims[1],
                                                            &dims[2], &dims[3]));
  LIFTOFF_CHECK(dims[0] == g.n && dims[1] == g.k && dims[2] == g.oh && dims[3] == g.ow, BackendError,
                "conv2d: cuDNN computes output [", dims[0], ", ", dims[1], ", ", dims[2], ", ", dims[3],
                "] but Liftoff expects [", g.n, ", ", g.k, ", ", g.oh, ", ", g.ow, "]");
  Plan& result = *plan;
  cache.emplace(key, std::move(plan));
  return result;
}

// The search's scratch is its own allocation, returned as soon as the search ends: some algorithms ask for
// hundreds of MiB, and keeping that in the persistent workspace would hold it for the whole run (the
// persistent one grows only to what the chosen algorithms need). Shrinks when the memory is not there.
constexpr size_t kMaxSearchWorkspace = size_t{512} << 20;
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
      std::fprintf(stderr,
                   "liftoff cudnn: %s %s: algo %d, %.3f ms, workspace %.1f MiB (searched with %.1f MiB)\n",
                   direction, shape_text(g, dtype).c_str(), static_cast<int>(perf[i].algo),
                   static_cast<double>(perf[i].time), static_cast<double>(perf[i].memory) / 1048576.0,
                   static_cast<double>(limit) / 1048576.0);
    }
    return;
  }
  throw BackendError(str_cat("conv2d: cuDNN found no usable ", deterministic ? "deterministic " : "",
                             direction, " algorithm for ", shape_text(g, dtype)));
}

void find_forward(cudnnHandle_t handle, int device, Plan& p, const Tensor& x, const Tensor& w,
                  const Tensor& y, const Conv2dShape& g) {
  size_t limit = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.fwd, p.y,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                &bytes) == CUDNN_STATUS_SUCCESS) {
      limit = std::max(limit, bytes);
    }
  }
  const SearchWorkspace ws(device, limit, x.dtype());
  limit = ws.bytes();
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      handle, p.x, x.raw_data(), p.w, w.raw_data(), p.fwd, p.y, y.raw_data(),
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws.get(), limit));
  take_best(perf, returned, limit, p.fwd, &p.fwd_choice, "forward", g, x.dtype());
}

void find_backward_data(cudnnHandle_t handle, int device, Plan& p, const Tensor& w, const Tensor& gy,
                        const Tensor& gx, const Conv2dShape& g) {
  size_t limit = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.y, p.bwd_data, p.x,
                                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(a),
                                                     &bytes) == CUDNN_STATUS_SUCCESS) {
      limit = std::max(limit, bytes);
    }
  }
  const SearchWorkspace ws(device, limit, w.dtype());
  limit = ws.bytes();
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int returned = 0;
  LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      handle, p.w, w.raw_data(), p.y, gy.raw_data(), p.bwd_data, p.x, gx.raw_data(),
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws.get(), limit));
  take_best(perf, returned, limit, p.bwd_data, &p.bwd_data_choice, "backward-data", g, gy.dtype());
}

void find_backward_filter(cudnnHandle_t handle, int device, Plan& p, const Tensor& x, const Tensor& gy,
                          const Tensor& gw, const Conv2dShape& g) {
  size_t limit = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.x, p.y, p.bwd_filter, p.w,
                                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(a),
                                                       &bytes) == CUDNN_STATUS_SUCCESS) {
      limit = std::max(limit, bytes);
    }
  }
  const SearchWorkspace ws(device, limit, x.dtype());
  limit = ws.bytes();
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int returned = 0;
  LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      handle, p.x, x.raw_data(), p.y, gy.raw_data(), p.bwd_filter, p.w, gw.raw_data(),
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, ws.get(), limit));
  take_best(perf, returned, limit, p.bwd_filter, &p.bwd_filter_choice, "backward-filter", g, gy.dtype());
}

// The graph API's search scratch: the engines these convolutions get need a few MiB at most; a larger
// scratch would only raise the run's peak memory (it is returned right after the search).
constexpr size_t kGraphSearchWorkspace = size_t{64} << 20;

// Times the legacy choice (run_legacy, given a workspace) and the graph API's engines on the call's buffers,
// and returns a graph plan that was faster (under ConvEngines::graph, any that runs); null keeps the legacy
// algorithm.
std::shared_ptr<conv_graph::GraphPlan> graph_plan_for(conv_graph::Direction direction, cudnnHandle_t handle,
                                                      int device, const Conv2dShape& g, DType dtype,
                                                      const conv_graph::Buffers& buffers, size_t legacy_bytes,
                                                      const std::function<void(void*)>& run_legacy) {
  const ConvEngines engines = conv_engines();
  if (engines == ConvEngines::legacy || dtype == DType::f64 || deterministic_algorithms()) return nullptr;
  // Grouped and dilated convolutions stay on the legacy API (cudnnSetConvolutionGroupCount): the graph
  // descriptors would express them (weight [K, C/groups, R, S], dilations), but that path has not been timed
  // or validated on the GPU for them yet.
  if (g.groups != 1 || g.dilation != 1) return nullptr;
  const SearchWorkspace scratch(
      device,
      std::max(legacy_bytes, std::min(kGraphSearchWorkspace, SearchWorkspace::workspace_limit(dtype))),
      dtype);
  float legacy_ms = std::numeric_limits<float>::infinity();
  if (engines == ConvEngines::automatic && legacy_bytes <= scratch.bytes()) {
    legacy_ms = conv_graph::time_ms(device, [&] { run_legacy(scratch.get()); });
  }
  const conv_graph::SearchResult found = conv_graph::search(direction, handle, device, g, dtype, buffers,
                                                            scratch.get(), scratch.bytes(), legacy_ms);
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
bool run_graph_plan(const std::shared_ptr<conv_graph::GraphPlan>& plan, cudnnHandle_t handle, int device,
                    const conv_graph::Buffers& buffers) {
  if (!plan || !conv_graph::accepts(buffers)) return false;
  const size_t bytes = conv_graph::workspace_bytes(*plan);
  conv_graph::execute(handle, *plan, buffers, bytes > 0 ? workspace(device, bytes) : nullptr);
  graph_executions().fetch_add(1, std::memory_order_relaxed);
  return true;
}

void require_contiguous(const Tensor& t, const char* what) {
  if (t.defined()) {
    LIFTOFF_CHECK(t.is_contiguous(), ValueError, "conv2d (CUDA): internal: ", what, " ", shape_str(t.shape()),
                  " must be contiguous");
  }
}

// A 4-D tensor (x, w, y or a gradient of one) in the plan's layout.
void require_layout(const Tensor& t, const Conv2dShape& g, const char* what) {
  if (!t.defined()) return;
  const bool ok = g.channels_last ? t.is_channels_last() : t.is_contiguous();
  LIFTOFF_CHECK(ok, ValueError, "conv2d (CUDA): internal: ", what, " ", shape_str(t.shape()),
                " with strides ", shape_str(t.strides()), " must be ",
                g.channels_last ? "channels-last" : "contiguous");
}
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                    const Conv2dShape& g) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  if (g.n == 0) return;
  require_layout(x, g, "input");
  require_layout(w, g, "weight");
  require_layout(y, g, "output");
  const DType dtype = x.dtype();
  cudnnHandle_t handle = cudnn_handle(device);
  cudnnTensorDescriptor_t x_desc, y_desc;
  cudnnFilterDescriptor_t w_desc;
  cudnnConvolutionDescriptor_t conv_desc;
  Choice<cudnnConvolutionFwdAlgo_t> choice;
  std::shared_ptr<conv_graph::GraphPlan> graph;
  const conv_graph::Buffers buffers{x.raw_data(), w.raw_data(), y.raw_data()};
  auto run_legacy = [&](void* ws) {
    LIFTOFF_CUDNN_CHECK(cudnnConvolutionForward(
        handle, scalar_one(dtype), x_desc, x.raw_data(), w_desc, w.raw_data(), conv_desc, choice.algo, ws,
        choice.workspace_bytes, scalar_zero(dtype), y_desc, y.raw_data()));
  };
  {
    std::lock_guard<std::mutex> lock(plans_mutex());
    Plan& plan = plan_for(device, dtype, g);
    x_desc = plan.x;
    y_desc = plan.y;
    w_desc = plan.w;
    conv_desc = plan.fwd;
    if (!plan.fwd_choice.found) {
      find_forward(handle, device, plan, x, w, y, g);
      choice = plan.fwd_choice;
      plan.fwd_graph = graph_plan_for(conv_graph::Direction::forward, handle, device, g, dtype, buffers,
                                      choice.workspace_bytes, run_legacy);
    }
    choice = plan.fwd_choice;
    graph = plan.fwd_graph;
  }
  if (!run_graph_plan(graph, handle, device, buffers)) {
    run_legacy(choice.workspace_bytes ? workspace(device, choice.workspace_bytes) : nullptr);
  }
  if (bias.defined()) {
    require_contiguous(bias, "bias");
    const int64_t n = y.numel();
    dispatch_device_float(dtype, "conv2d", [&](auto tag) {
      using T = decltype(tag);
      add_bias_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
          static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), n, g.oh * g.ow, g.k,
          g.channels_last);
      LIFTOFF_LAUNCH_CHECK();
    });
  }
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dShape& g) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  require_layout(gy, g, "output gradient");
  require_layout(gx, g, "input gradient");
  require_layout(gw, g, "weight gradient");
  require_contiguous(gb, "bias gradient");
  const DType dtype = gy.dtype();
  if (gb.defined() && g.k > 0) {
    // About 1024 blocks in all, at least 8192 values each; a fixed split: the sum does not depend on timing.
    const int64_t count = g.n * g.oh * g.ow;
    const int64_t chunks =
        std::max<int64_t>(1, std::min<int64_t>(count / 8192, std::max<int64_t>(1, 1024 / g.k)));
    LIFTOFF_CHECK(g.k <= 65535, ShapeError, "conv2d backward: ", g.k,
                  " output channels exceed the bias kernel's "
                  "grid (65535)");
    const DType acc = dtype == DType::f64 ? DType::f64 : DType::f32;
    const Tensor partials = Tensor::empty({g.k * chunks}, acc, gy.device());
    dispatch_device_float(dtype, "conv2d backward", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(g.k));
      bias_grad_partial_kernel<T><<<grid, kBlock, 0, compute_stream(device)>>>(
          static_cast<const T*>(gy.raw_data()), static_cast<A*>(partials.raw_data()), g.n, g.k, g.oh * g.ow,
          chunks, g.channels_last);
      LIFTOFF_LAUNCH_CHECK();
      const auto finish_blocks = static_cast<unsigned>((g.k + kBlock - 1) / kBlock);
      bias_grad_finish_kernel<T><<<finish_blocks, kBlock, 0, compute_stream(device)>>>(
          static_cast<const A*>(partials.raw_data()), static_cast<T*>(gb.raw_data()), g.k, chunks);
      LIFTOFF_LAUNCH_CHECK();
    });
  } else if (gb.defined()) {
    gb.zero_();
  }
  if (!gx.defined() && !gw.defined()) return;
  if (g.n == 0) {
    if (gw.defined()) gw.zero_();
    return;
  }
  require_layout(x, g, "input");
  require_layout(w, g, "weight");
  cudnnHandle_t handle = cudnn_handle(device);
  cudnnTensorDescriptor_t x_desc, y_desc;
  cudnnFilterDescriptor_t w_desc;
  cudnnConvolutionDescriptor_t data_desc, filter_desc;
  Choice<cudnnConvolutionBwdDataAlgo_t> data_choice;
  Choice<cudnnConvolutionBwdFilterAlgo_t> filter_choice;
  std::shared_ptr<conv_graph::GraphPlan> data_graph, filter_graph;
  // Only what a direction needs is defined (the front saves w only for gx, x only for gw).
  auto data_of = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  const conv_graph::Buffers data_buffers{data_of(gx), data_of(w), gy.raw_data()};
  const conv_graph::Buffers filter_buffers{data_of(x), data_of(gw), gy.raw_data()};
  auto run_data = [&](void* ws) {
    LIFTOFF_CUDNN_CHECK(cudnnConvolutionBackwardData(
        handle, scalar_one(dtype), w_desc, w.raw_data(), y_desc, gy.raw_data(), data_desc, data_choice.algo,
        ws, data_choice.workspace_bytes, scalar_zero(dtype), x_desc, gx.raw_data()));
  };
  auto run_filter = [&](void* ws) {
    LIFTOFF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        handle, scalar_one(dtype), x_desc, x.raw_data(), y_desc, gy.raw_data(), filter_desc,
        filter_choice.algo, ws, filter_choice.workspace_bytes, scalar_zero(dtype), w_desc, gw.raw_data()));
  };
  {
    std::lock_guard<std::mutex> lock(plans_mutex());
    Plan& plan = plan_for(device, dtype, g);
    x_desc = plan.x;
    y_desc = plan.y;
    w_desc = plan.w;
    data_desc = plan.bwd_data;
    filter_desc = plan.bwd_filter;
    if (gx.defined() && !plan.bwd_data_choice.found) {
      find_backward_data(handle, device, plan, w, gy, gx, g);
      data_choice = plan.bwd_data_choice;
      plan.bwd_data_graph = graph_plan_for(conv_graph::Direction::backward_data, handle, device, g, dtype,
                                           data_buffers, data_choice.workspace_bytes, run_data);
    }
    if (gw.defined() && !plan.bwd_filter_choice.found) {
      find_backward_filter(handle, device, plan, x, gy, gw, g);
      filter_choice = plan.bwd_filter_choice;
      plan.bwd_filter_graph = graph_plan_for(conv_graph::Direction::backward_filter, handle, device, g, dtype,
                                             filter_buffers, filter_choice.workspace_bytes, run_filter);
    }
    data_choice = plan.bwd_data_choice;
    filter_choice = plan.bwd_filter_choice;
    data_graph = plan.bwd_data_graph;
    filter_graph = plan.bwd_filter_graph;
  }
  if (gx.defined() && !run_graph_plan(data_graph, handle, device, data_buffers)) {
    run_data(data_choice.workspace_bytes ? workspace(device, data_choice.workspace_bytes) : nullptr);
  }
  if (gw.defined() && !run_graph_plan(filter_graph, handle, device, filter_buffers)) {
    run_filter(filter_choice.workspace_bytes ? workspace(device, filter_choice.workspace_bytes) : nullptr);
  }
}

void set_conv_engines(ConvEngines engines) {
  engines_setting().store(static_cast<int>(engines), std::memory_order_relaxed);
}

ConvEngines conv_engines() {
  return static_cast<ConvEngines>(engines_setting().load(std::memory_order_relaxed));
}

int64_t conv_graph_executions() {
  return graph_executions().load(std::memory_order_relaxed);
}

}  // namespace liftoff::cuda
