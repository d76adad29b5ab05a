#include "runtime/random.h"

#include <cmath>

#include "runtime/dispatch.h"
#include "runtime/capture.h"
#include "runtime/philox.h"

namespace liftoff {

uint64_t Generator::next_offset() {
  check_not_capturing("Drawing random numbers on the host (dropout, random init)");
  return offset_++;
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
