// Shared by the MPI and NCCL DDP tests: a small MLP (no batch norm), a deterministic combined batch, and one
// training run either through DDP (this rank's half of each micro-batch) or single-process on the combined
// micro-batches.
#pragma once
#include <memory>
#include <vector>

#include "models/train/ddp.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/scale/scale.h"
#include "runtime/random.h"

namespace liftoff::testing {

inline std::shared_ptr<Sequential> make_mlp(uint64_t seed, Device device, DType dtype) {
  Generator gen(seed);
  auto model = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(6, 32, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(32, 16, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(16, 4, true, gen)});
  model->to(device, dtype);
  return model;
}

struct MicroBatch {
  Tensor x;  // [rows, 6]
  Tensor y;  // [rows] i64
};

// Micro-batch `index` of the combined batch: `rows` rows, the same on every rank.
inline MicroBatch combined_micro_batch(int64_t index, int64_t rows, Device device, DType dtype) {
  std::vector<double> x(static_cast<size_t>(rows * 6));
  std::vector<int64_t> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < 6; ++c) {
      const int64_t k = index * 1000 + r * 6 + c;
      x[static_cast<size_t>(r * 6 + c)] = static_cast<double>((k * 7919) % 201 - 100) / 50.0;
    }
    y[static_cast<size_t>(r)] = (index * 31 + r * 7) % 4;
  }
  return {Tensor::from_vector<double>(x, {rows, 6}).to(device, dtype),
          Tensor::from_vector<int64_t>(y, {rows}).to(device)};
}

// Rows [rank * rows / world, (rank + 1) * rows / world) of a micro-batch.
inline MicroBatch shard_of(const MicroBatch& b, int rank, int world) {
  const int64_t per = b.x.size(0) / world;
  return {b.x.slice(0, rank * per, (rank + 1) * per).contiguous(),
          b.y.slice(0, rank * per, (rank + 1) * per).contiguous()};
}

// `steps` optimizer steps of `accum` micro-batches of `rows` combined rows. With ddp, each rank trains on its
// shard; without, on the combined rows.
inline void train_steps(Module& model, DistributedDataParallel* ddp, int64_t steps, int64_t accum,
                        int64_t rows, DType dtype) {
  SGD optimizer(model.parameters(), 0.05, 0.9, 1e-3);
  const Device device = model.parameters().front().device();
  int64_t index = 0;
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t m = 0; m < accum; ++m, ++index) {
      MicroBatch b = combined_micro_batch(index, rows, device, dtype);
      if (ddp != nullptr) {
        ddp->set_require_sync(m == accum - 1);
        b = shard_of(b, ddp->group().rank(), ddp->group().world_size());
      }
      const Tensor loss = cross_entropy(model(b.x), b.y);
      (accum > 1 ? scale(loss, 1.0 / static_cast<double>(accum)) : loss).backward();
    }
    if (ddp != nullptr) ddp->synchronize_gradients();
    optimizer.step();
    optimizer.zero_grad();
  }
}

}  // namespace liftoff::testing
