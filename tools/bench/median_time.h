// The benches' timer: median seconds per call of fn over `rounds` rounds of `reps` calls, after three warm-up
// calls, with the device synchronised around each round (host clock: the rounds are long enough).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/device.h"

namespace liftoff::bench {

template <class Fn>
double median_seconds(Fn&& fn, Device device, int reps, int rounds) {
  for (int i = 0; i < 3; ++i) fn();
  synchronize(device);
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    synchronize(device);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace liftoff::bench
