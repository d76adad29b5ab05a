// Seedable random tensors. A Generator is (seed, offset): each draw reserves a fresh range of Philox counters
// by advancing the offset, so results are reproducible from the seed and the order of draws alone.
//
// Graph-safe draws (as PyTorch's CUDA generator): kernels that draw on CUDA (dropout, attention dropout) take
// a PhiloxDraw from next_draw(). Eagerly it is (seed, offset++) by value. While a CUDA graph is captured it
// points the kernel at the generator's device state [seed, offset] (own cudaMalloc, never a graph pool's
// block) plus the draw's index among the graph's draws; before every replay the graph writes the current
// (seed, offset) there and advances the offset past its draws (detail::CapturedDraws, runtime/graph.cpp).
// A replayed step draws exactly what the same eager step would, fresh numbers every time. The host (seed,
// offset) is the one truth: checkpoints save and restore it, set_state() takes effect at the next replay.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace liftoff {

namespace detail {
struct GeneratorState;
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0);
  ~Generator();
  // A copy is an independent generator at the same (seed, offset).
  Generator(const Generator& other);
  Generator& operator=(const Generator& other);

  uint64_t seed() const;
  uint64_t offset() const;
  void set_state(uint64_t seed, uint64_t offset);
  // Reserves one Philox stream for a draw made on the host and returns its offset. Not while capturing a CUDA
  // graph (a replay would reuse the captured offset): throws GraphCaptureError then.
  uint64_t next_offset();
  // Reserves one Philox stream for a kernel running on `device` (graph-safe on CUDA, see above). On the CPU
  // the same as {seed(), next_offset()}.
  PhiloxDraw next_draw(Device device);

 private:
  std::shared_ptr<detail::GeneratorState> state_;
};

namespace detail {
// The kernel draws one CUDA graph capture made, per generator. CudaGraph owns one: begin() at the start of
// its capture, end() when the capture stops, before_replay() right before each launch of the graph.
class CapturedDraws {
 public:
  CapturedDraws();
  ~CapturedDraws();
  CapturedDraws(const CapturedDraws&) = delete;
  CapturedDraws& operator=(const CapturedDraws&) = delete;

  // Records the calling thread's next_draw() calls on `device` from now on (forgets an earlier record).
  void begin(int device);
  // Stops recording; the record stays for the replays.
  void end() noexcept;
  // Writes each generator's (seed, offset) into its device state on `stream` (the graph's cudaStream_t; one
  // small kernel, ordered before the graph launch; no host sync) and advances each offset past the graph's
  // draws. Nothing to do for a graph that drew nothing.
  void before_replay(void* stream);
  // Generators the captured graph draws from.
  size_t generators() const;
  // Called by Generator::next_draw while this thread records: the draw's PhiloxDraw inside the graph.
  PhiloxDraw reserve(const std::shared_ptr<GeneratorState>& state);

 private:
  struct Entry;
  std::vector<Entry> entries_;
  int device_ = -1;
};
}  // namespace detail

// Normal(mean, std) and Uniform[low, high) tensors, generated on the host (f32 or f64) then moved to device.
Tensor randn(const Shape& shape, Generator& gen, double mean = 0.0, double std = 1.0,
             DType dtype = DType::f32, Device device = Device::cpu());
Tensor rand_uniform(const Shape& shape, Generator& gen, double low = 0.0, double high = 1.0,
                    DType dtype = DType::f32, Device device = Device::cpu());
// A random permutation of 0..n-1 (Fisher-Yates driven by Philox).
std::vector<int64_t> randperm(int64_t n, Generator& gen);

}  // namespace liftoff
