#include "runtime/random.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/capture.h"
#include "runtime/dispatch.h"
#include "runtime/philox.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/rng_state.h"
#endif

namespace liftoff {

namespace detail {
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Per CUDA device: [seed, offset] for the draws of captured graphs, made at the first such draw (own
  // memory, never a graph pool's block: runtime/cuda/rng_state.h says why).
  std::map<int, uint64_t*> device_state;

  GeneratorState() = default;
  GeneratorState(const GeneratorState&) = delete;
  GeneratorState& operator=(const GeneratorState&) = delete;
  ~GeneratorState() {
#if LIFTOFF_WITH_CUDA
    for (const auto& [device, state] : device_state) cuda::free_generator_state(state);
#endif
  }

  uint64_t* device_state_on(int device) {
    uint64_t*& state = device_state[device];
#if LIFTOFF_WITH_CUDA
    if (state == nullptr) state = cuda::allocate_generator_state(device);
#endif
    return state;
  }
};

struct CapturedDraws::Entry {
  std::shared_ptr<GeneratorState> state;
  uint64_t draws = 0;  // Philox streams one replay reserves from the generator
};

namespace {
thread_local CapturedDraws* recording_on_this_thread = nullptr;
}  // namespace

CapturedDraws::CapturedDraws() = default;
CapturedDraws::~CapturedDraws() {
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
}

void CapturedDraws::begin(int device) {
  entries_.clear();
  device_ = device;
  recording_on_this_thread = this;
}

void CapturedDraws::end() noexcept {
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
}

size_t CapturedDraws::generators() const {
  return entries_.size();
}

PhiloxDraw CapturedDraws::reserve(const std::shared_ptr<GeneratorState>& state) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.state == state; });
  if (it == entries_.end()) it = entries_.insert(entries_.end(), Entry{state, 0});
  PhiloxDraw draw;
  draw.offset = it->draws++;
  draw.device_state = state->device_state_on(device_);
  return draw;
}

void CapturedDraws::before_replay(void* stream) {
  if (entries_.empty()) return;
#if LIFTOFF_WITH_CUDA
  std::vector<cuda::GeneratorStateWrite> writes;
  writes.reserve(entries_.size());
  for (const Entry& e : entries_) {
    writes.push_back({e.state->device_state_on(device_), e.state->seed, e.state->offset});
  }
  cuda::write_generator_states(device_, stream, writes);
#else
  (void)stream;
#endif
  for (const Entry& e : entries_) e.state->offset += e.draws;  // what the eager step's draws would do
}
}  // namespace detail

Generator::Generator(uint64_t seed) : state_(std::make_shared<detail::GeneratorState>()) {
  state_->seed = seed;
}
Generator::~Generator() = default;
Generator::Generator(const Generator& other) : Generator(other.seed()) {
  state_->offset = other.offset();
}
Generator& Generator::operator=(const Generator& other) {
  if (this != &other) set_state(other.seed(), other.offset());
  return *this;
}

uint64_t Generator::seed() const {
  return state_->seed;
}
uint64_t Generator::offset() const {
  return state_->offset;
}
void Generator::set_state(uint64_t seed, uint64_t offset) {
  state_->seed = seed;
  state_->offset = offset;
}

uint64_t Generator::next_offset() {
  check_not_capturing("Drawing random numbers on the host (random init, randn, randperm)");
  return state_->offset++;
}

PhiloxDraw Generator::next_draw(Device device) {
  if (device.is_cuda() && graph_capture_active()) {
    LIFTOFF_CHECK(detail::recording_on_this_thread != nullptr && graph_capture_device() == device.index,
                  GraphCaptureError, "A random draw for ", device.str(),
                  " while capturing a CUDA graph on cuda:", graph_capture_device(),
                  " cannot be replayed; run this step eagerly (--cuda-graphs off)");
    return detail::recording_on_this_thread->reserve(state_);
  }
  PhiloxDraw draw;
  draw.seed = state_->seed;
  draw.offset = next_offset();
  return draw;
}

namespace {
template <class Fn>
Tensor generate(const Shape& shape, DType dtype, Device device, Fn&& value_at) {
  Tensor host = Tensor::empty(shape, DType::f64, Device::cpu());
  double* p = host.data<double>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = value_at(i);
  return host.to(device, dtype);
}

// Uniform in (0, 1]: never zero, so log() in Box-Muller stays finite.
double open_uniform(uint32_t bits) {
  return (static_cast<double>(bits) + 1.0) / 4294967296.0;
}
}  // namespace

Tensor randn(const Shape& shape, Generator& gen, double mean, double std, DType dtype, Device device) {
  const uint64_t seed = gen.seed();
  const uint64_t offset = gen.next_offset();
  return generate(shape, dtype, device, [&](int64_t i) {
    const Philox4 r = philox_at(seed, offset, static_cast<uint64_t>(i));
    const double u1 = open_uniform(r.v[0]);
    const double u2 = open_uniform(r.v[1]);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

Tensor rand_uniform(const Shape& shape, Generator& gen, double low, double high, DType dtype, Device device) {
  const uint64_t seed = gen.seed();
  const uint64_t offset = gen.next_offset();
  return generate(shape, dtype, device, [&](int64_t i) {
    const Philox4 r = philox_at(seed, offset, static_cast<uint64_t>(i));
    const uint64_t bits53 = (static_cast<uint64_t>(r.v[0]) << 21) ^ (r.v[1] >> 11);
    return low + (high - low) * (static_cast<double>(bits53 & ((1ull << 53) - 1)) / 9007199254740992.0);
  });
}

std::vector<int64_t> randperm(int64_t n, Generator& gen) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  const uint64_t seed = gen.seed();
  const uint64_t offset = gen.next_offset();
  for (int64_t i = n - 1; i > 0; --i) {
    const Philox4 r = philox_at(seed, offset, static_cast<uint64_t>(i));
    const uint64_t draw = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
    const int64_t j = static_cast<int64_t>(draw % static_cast<uint64_t>(i + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

}  // namespace liftoff
