#include <algorithm>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/rng_state.h"

namespace liftoff::cuda {

namespace {
constexpr int kWritesPerLaunch = 128;  // 3 KB of kernel parameters

struct WriteBatch {
  GeneratorStateWrite writes[kWritesPerLaunch];
  int count;
};
static_assert(sizeof(WriteBatch) <= 4000, "kernel parameters must stay < 4 KB");

__global__ void write_generator_states_kernel(WriteBatch batch) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= batch.count) return;
  const GeneratorStateWrite w = batch.writes[i];
  w.state[0] = w.seed;
  w.state[1] = w.offset;
}
}  // namespace

uint64_t* allocate_generator_state(int device) {
  DeviceGuard guard(device);
  void* state = nullptr;
  LIFTOFF_CUDA_CHECK(cudaMalloc(&state, 2 * sizeof(uint64_t)));
  return static_cast<uint64_t*>(state);
}

void free_generator_state(uint64_t* state) noexcept {
  // Unified addressing: any current device frees it. An error (the driver already shut down at exit) leaves
  // nothing to free; it is cleared so it does not surface at an unrelated later check.
  if (state != nullptr && cudaFree(state) != cudaSuccess) cudaGetLastError();
}

void write_generator_states(int device, void* stream, const std::vector<GeneratorStateWrite>& writes) {
  DeviceGuard guard(device);
  for (size_t start = 0; start < writes.size(); start += kWritesPerLaunch) {
    WriteBatch batch{};
    batch.count = static_cast<int>(std::min<size_t>(kWritesPerLaunch, writes.size() - start));
    std::copy_n(writes.begin() + static_cast<std::ptrdiff_t>(start), batch.count, batch.writes);
    write_generator_states_kernel<<<1, kWritesPerLaunch, 0, static_cast<cudaStream_t>(stream)>>>(batch);
    LIFTOFF_LAUNCH_CHECK();
  }
}

}  // namespace liftoff::cuda
