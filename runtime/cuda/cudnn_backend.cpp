#include "runtime/cuda/cudnn_backend.h"

#include <algorithm>

namespace liftoff::cuda {

std::vector<BackendDesc> heuristic_engine_configs(const BackendDesc& graph, cudnnBackendHeurMode_t mode,
                                                  int64_t limit) {
  BackendDesc heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heuristics.finalize();
  int64_t available = 0;
  LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  const int64_t wanted = std::min<int64_t>(available, limit);
  std::vector<BackendDesc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < wanted; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (wanted > 0) {
    LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, wanted, &returned,
                                                 raw.data()));
  }
  configs.erase(configs.begin() + std::min(returned, wanted), configs.end());
  return configs;
}

int64_t engine_global_index(const BackendDesc& config, BackendDesc* engine) {
  BackendDesc own(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  BackendDesc& target = engine != nullptr ? *engine : own;
  cudnnBackendDescriptor_t e = target.get();
  int64_t count = 0, index = -1;
  LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &e));
  LIFTOFF_CUDNN_CHECK(
      cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index));
  return index;
}

}  // namespace liftoff::cuda
