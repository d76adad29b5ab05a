// conv2d's cuDNN plans (internal to conv2d's CUDA path). Per shape (dtype, layout, geometry, groups,
// dilation, --deterministic, engine setting) a plan holds the legacy API's descriptors and, per direction,
// the algorithm found once with cudnnFind*AlgorithmEx (PyTorch's cudnn.benchmark), its workspace size and
// math type; then, unless turned off, the graph API's engines for the same direction are timed against it
// (cudnn_graph.h) and the faster is kept. The plans live in a ConvPlanCache owned by the device's context
// (runtime/cuda/context.h, device_extension). The searches synchronize; every later call only enqueues.
#pragma once
#include <cstddef>
#include <string>

#include "ops/conv2d/cudnn_graph.h"
#include "ops/conv2d/kernels.h"
#include "runtime/dtype.h"

namespace liftoff::cuda::conv_plans {

// One convolution of one direction on its buffers (their roles per direction: conv_graph::Buffers).
struct Call {
  conv_graph::Direction direction;
  conv_graph::Buffers buffers;
  // Backward data only: add the input gradient into Buffers::x, which holds one already (beta = 1). A
  // search for the shape then runs its candidates on a scratch output.
  bool accumulate = false;
};

// Enqueues `calls` in order on the device's compute stream. A direction used for the first time with this
// shape is searched first (synchronizes: eager steps only); all searches happen before any call is enqueued.
void run(int device, DType dtype, const Conv2dShape& g, const Call* calls, size_t count);

// The algorithm store's key (algorithm_store.h) of one shape and direction: everything a plan is cached by,
// as text, and how the candidates are timed (replayed in graphs before a capture, else launched one by one):
// an eager run's choice, kept for a captured run, would serve it an engine chosen for launch costs it does
// not pay.
std::string store_key(DType dtype, const Conv2dShape& g, conv_graph::Direction direction);

}  // namespace liftoff::cuda::conv_plans
