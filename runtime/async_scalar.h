// Reads a one-element device tensor on the host without stopping the device: post() queues a copy into pinned
// memory on the compute stream and records an event; latest() returns the newest value whose copy has
// finished (a step or so late), never waiting. The training loop's loss for progress lines is read this way.
#pragma once
#include <memory>

#include "runtime/tensor.h"

namespace liftoff {

class AsyncScalar {
 public:
  AsyncScalar();
  ~AsyncScalar();
  AsyncScalar(const AsyncScalar&) = delete;
  AsyncScalar& operator=(const AsyncScalar&) = delete;

  // Queues a read of t (one f32 element); `scale` multiplies the value when it is read (e.g. 1 / count).
  // A post while the previous copy is still in flight is dropped: the reader only wants a recent value.
  void post(const Tensor& t, double scale = 1.0);
  // True once any posted value has arrived; value() is then the newest arrived one.
  bool latest(double* value);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace liftoff
