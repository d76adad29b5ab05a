// A small RAII wrapper over one descriptor of cuDNN's graph (backend) API, shared by the ops that build
// backend graphs (ops/conv2d/cudnn_graph.cpp, ops/attention/cudnn_sdpa_graph.cpp). Setting an attribute or
// finalizing throws BackendError (LIFTOFF_CUDNN_CHECK) naming the call and cuDNN's own reason.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/cuda/check.h"

namespace liftoff::cuda {

// One backend descriptor, destroyed with its owner.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type) {
    LIFTOFF_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_));
  }
  ~BackendDesc() {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
  }
  BackendDesc(BackendDesc&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  BackendDesc& operator=(BackendDesc&& other) noexcept {
    if (this != &other) {
      if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
      desc_ = std::exchange(other.desc_, nullptr);
    }
    return *this;
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  BackendDesc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                   const void* values) {
    LIFTOFF_CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
    return *this;
  }
  BackendDesc& set_desc(cudnnBackendAttributeName_t name, const BackendDesc& other) {
    cudnnBackendDescriptor_t d = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  void finalize() { LIFTOFF_CUDNN_CHECK(cudnnBackendFinalize(desc_)); }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

// The engine configurations cuDNN's heuristics list for a finalized operation graph in `mode`, at most
// `limit` of them, best first.
std::vector<BackendDesc> heuristic_engine_configs(const BackendDesc& graph, cudnnBackendHeurMode_t mode,
                                                  int64_t limit);
// The global index of the engine an engine configuration names (what plans and logs identify it by); also
// fills *engine with that engine's descriptor when engine is given (its notes can then be read).
int64_t engine_global_index(const BackendDesc& config, BackendDesc* engine = nullptr);

}  // namespace liftoff::cuda
