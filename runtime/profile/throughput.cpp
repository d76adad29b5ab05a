#include "runtime/profile/throughput.h"

#include <algorithm>

namespace liftoff {

void ThroughputMeter::add_step(double begin_s, double device_end_s, int64_t images, bool measured) {
  const double start = any_ ? std::max(begin_s, last_end_s_) : begin_s;
  ThroughputFigures& f = measured ? measured_ : warmup_;
  ++f.steps;
  f.images += images;
  // A device end before the host's begin is the clock anchoring error (microseconds): an empty span.
  f.seconds += std::max(0.0, device_end_s - start);
  last_end_s_ = any_ ? std::max(last_end_s_, device_end_s) : device_end_s;
  any_ = true;
}

ThroughputFigures ThroughputMeter::figures() const {
  return measured_.steps > 0 ? measured_ : warmup_;
}

}  // namespace liftoff
