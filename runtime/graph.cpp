#include "runtime/graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/autocast.h"
#include "runtime/random.h"

#if LIFTOFF_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/config.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {

namespace {

#if LIFTOFF_WITH_CUDA
// LIFTOFF_GRAPH_LOG=1 prints what a captured graph holds, kernels by name, most frequent first: where a
// replayed step's per-node cost goes.
bool log_graphs() {
  return *config::get_bool(config::Knob::graph_log);
}

std::string node_name(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return "?";
  switch (type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams params{};
      const char* name = nullptr;
      if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess ||
          cudaFuncGetName(&name, params.func) != cudaSuccess || name == nullptr) {
        cudaGetLastError();  // a library's driver-API launch has no runtime function: not an error here
        return "kernel (library)";
      }
      std::string text = name;
      // "void ns::kernel<T>(args)" -> "ns::kernel<T>": the arguments only repeat the template.
      if (text.rfind("void ", 0) == 0) text = text.substr(5);
      const size_t paren = text.find('(');
      return paren == std::string::npos ? text : text.substr(0, paren);
    }
    case cudaGraphNodeTypeMemcpy:
      return "memcpy";
    case cudaGraphNodeTypeMemset:
      return "memset";
    case cudaGraphNodeTypeEventRecord:
      return "event record";
    case cudaGraphNodeTypeWaitEvent:
      return "event wait";
    case cudaGraphNodeTypeEmpty:
      return "empty";
    default:
      return "node type " + std::to_string(static_cast<int>(type));
  }
}

void print_node_histogram(const std::vector<cudaGraphNode_t>& nodes, int device) {
  std::map<std::string, int> counts;
  for (cudaGraphNode_t node : nodes) ++counts[node_name(node)];
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [name, count] : counts) sorted.emplace_back(count, name);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::fprintf(stderr, "liftoff graph: cuda:%d, %zu nodes\n", device, nodes.size());
  for (const auto& [count, name] : sorted) std::fprintf(stderr, "  %5d  %s\n", count, name.c_str());
}
#endif
}  // namespace

#if LIFTOFF_WITH_CUDA
struct CudaGraph::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  int pool = 0;
  bool capturing = false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaGraphNode_t> event_nodes;           // event-record nodes in capture order
  detail::CapturedDraws draws;                        // random draws of the captured kernels (graph-safe RNG)
  std::vector<std::shared_ptr<const void>> retained;  // retain_for_captured_graph(): alive while we are
  size_t nodes = 0;
  int64_t replays = 0;

  cudaError_t stop_capture(cudaGraph_t* out) noexcept {
    cuda::CachingAllocator::get().end_private_pool(device, stream);
    detail::set_capture_state(false, -1);
    detail::set_capture_retainer(nullptr);
    draws.end();
    capturing = false;
    const cudaError_t err = cudaStreamEndCapture(stream, out);
    if (err != cudaSuccess) cudaGetLastError();  // an invalidated capture reports here; the caller explains
    return err;
  }
};

CudaGraph::CudaGraph(Device device) : impl_(std::make_unique<Impl>()) {
  LIFTOFF_CHECK(device.is_cuda(), DeviceError, "CUDA graphs need a CUDA device, got ", device.str());
  impl_->device = device.index;
  impl_->stream = cuda::compute_stream(device.index);
  impl_->pool = cuda::CachingAllocator::get().create_private_pool();
}

CudaGraph::~CudaGraph() {
  // No checks: destructors must not throw. An in-flight replay finishes before its executable is freed.
  if (impl_->capturing) impl_->stop_capture(&impl_->graph);
  if (impl_->exec) cudaGraphExecDestroy(impl_->exec);
  if (impl_->graph) cudaGraphDestroy(impl_->graph);
  impl_->retained.clear();  // what the executable read and wrote, now that it is gone
  // The pool's memory returns to the shared cache of the same stream: a later user is queued behind any
  // replay still running there.
  cuda::CachingAllocator::get().dissolve_private_pool(impl_->pool);
}

void CudaGraph::begin_capture() {
  LIFTOFF_CHECK(!impl_->capturing && impl_->exec == nullptr, ValueError,
                "CudaGraph: begin_capture on a graph that is capturing or already captured");
  LIFTOFF_CHECK(!graph_capture_active(), ValueError, "CudaGraph: this thread is already capturing a graph");
  cuda::DeviceGuard guard(impl_->device);
  cuda::CachingAllocator::get().begin_private_pool(impl_->device, impl_->stream, impl_->pool);
  // Relaxed: the caching allocator may cudaMalloc new blocks for the graph's pool while capturing (the other
  // modes forbid it). Host reads and copies are refused by check_not_capturing() instead.
  const cudaError_t err = cudaStreamBeginCapture(impl_->stream, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    cuda::CachingAllocator::get().end_private_pool(impl_->device, impl_->stream);
    LIFTOFF_CUDA_CHECK(err);
  }
  impl_->capturing = true;
  detail::set_capture_state(true, impl_->device);
  detail::set_capture_retainer(&impl_->retained);
  impl_->draws.begin(impl_->device);
  cuda::keep_workspaces_for_graphs(impl_->device);
}

void CudaGraph::end_capture(const std::vector<void*>& record_events) {
  LIFTOFF_CHECK(impl_->capturing, ValueError, "CudaGraph: end_capture without begin_capture");
  cuda::DeviceGuard guard(impl_->device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(impl_->stream, &status);
  const cudaError_t ended = impl_->stop_capture(&impl_->graph);
  if (ended == cudaErrorStreamCaptureUnjoined) {
    throw GraphCaptureError(str_cat(
        "CUDA graph capture on cuda:", impl_->device,
        " failed: work queued on another stream during the capture was not joined back into the compute "
        "stream (cudaErrorStreamCaptureUnjoined); run eagerly (--cuda-graphs off)"));
  }
  if (query != cudaSuccess || status != cudaStreamCaptureStatusActive || impl_->graph == nullptr) {
    throw GraphCaptureError(str_cat(
        "CUDA graph capture on cuda:", impl_->device,
        " was invalidated: the captured code made a call that cannot be captured (a host synchronisation, "
        "a legacy-stream copy, or work on another stream without an event; ",
        cudaGetErrorName(ended != cudaSuccess ? ended : query), "); run eagerly (--cuda-graphs off)"));
  }
  size_t count = 0;
  LIFTOFF_CUDA_CHECK(cudaGraphGetNodes(impl_->graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) LIFTOFF_CUDA_CHECK(cudaGraphGetNodes(impl_->graph, nodes.data(), &count));
  impl_->nodes = count;
  if (log_graphs()) print_node_histogram(nodes, impl_->device);
  // Map each event the caller recorded to its node, so replays can bind fresh events in the same order.
  impl_->event_nodes.assign(record_events.size(), nullptr);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    LIFTOFF_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeEventRecord) continue;
    cudaEvent_t event = nullptr;
    LIFTOFF_CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(node, &event));
    const auto it = std::find(record_events.begin(), record_events.end(), static_cast<void*>(event));
    if (it != record_events.end()) impl_->event_nodes[static_cast<size_t>(it - record_events.begin())] = node;
  }
  for (size_t i = 0; i < impl_->event_nodes.size(); ++i) {
    LIFTOFF_CHECK(impl_->event_nodes[i] != nullptr, GraphCaptureError, "CudaGraph: recorded event ", i,
                  " has no event-record node in the captured graph (was it recorded with "
                  "cudaEventRecordExternal on the captured stream?)");
  }
  LIFTOFF_CUDA_CHECK(cudaGraphInstantiate(&impl_->exec, impl_->graph, 0));
}

void CudaGraph::abort_capture() noexcept {
  if (!impl_->capturing) return;
  cudaGraph_t partial = nullptr;
  impl_->stop_capture(&partial);
  if (partial) cudaGraphDestroy(partial);
  cudaGetLastError();
  impl_->retained.clear();
  // Half weight copies refreshed inside the attempt were never written (nothing captured ran): every cache
  // casts afresh at its next use.
  advance_weight_version();
  // Nothing captured ever ran: what the attempt allocated is free for anyone.
  cuda::CachingAllocator::get().dissolve_private_pool(impl_->pool);
  impl_->pool = cuda::CachingAllocator::get().create_private_pool();
}

bool CudaGraph::ready() const {
  return impl_->exec != nullptr;
}

void CudaGraph::replay(const std::vector<void*>& record_events) {
  LIFTOFF_CHECK(impl_->exec != nullptr, ValueError, "CudaGraph: replay before a successful capture");
  LIFTOFF_CHECK(record_events.empty() || record_events.size() == impl_->event_nodes.size(), ValueError,
                "CudaGraph: replay with ", record_events.size(), " events for ", impl_->event_nodes.size(),
                " event-record nodes");
  cuda::DeviceGuard guard(impl_->device);
  for (size_t i = 0; i < record_events.size(); ++i) {
    LIFTOFF_CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(impl_->exec, impl_->event_nodes[i],
                                                            static_cast<cudaEvent_t>(record_events[i])));
  }
  impl_->draws.before_replay(impl_->stream);  // this replay's generator offsets, stream-ordered before it
  LIFTOFF_CUDA_CHECK(cudaGraphLaunch(impl_->exec, impl_->stream));
  ++impl_->replays;
}

size_t CudaGraph::num_nodes() const {
  return impl_->nodes;
}
int64_t CudaGraph::replays() const {
  return impl_->replays;
}

#else  // a build without CUDA

struct CudaGraph::Impl {};

CudaGraph::CudaGraph(Device device) {
  throw DeviceError(str_cat("CUDA graphs need a CUDA device (", device.str(),
                            " asked), and this build of Liftoff has no CUDA support"));
}
CudaGraph::~CudaGraph() = default;
void CudaGraph::begin_capture() {}
void CudaGraph::end_capture(const std::vector<void*>&) {}
void CudaGraph::abort_capture() noexcept {}
bool CudaGraph::ready() const {
  return false;
}
void CudaGraph::replay(const std::vector<void*>&) {}
size_t CudaGraph::num_nodes() const {
  return 0;
}
int64_t CudaGraph::replays() const {
  return 0;
}
#endif

}  // namespace liftoff
