// Throughput, defined once for the whole run: images over the wall time the device spent on the steps.
//
// A step's span runs from when the device could start it (the later of the host beginning the step and the
// device finishing the previous one) to when the step's end mark completed on the device. On a CUDA device
// that is an event the device has passed (a CUDA graph's steps are queued far ahead of the device, so the
// host's own step times would be the issue rate, not the training rate); on the CPU, where the work is done
// when the host returns, it is the host clock. The spans add up to the device's wall time from its first to
// its last step, leaving out the gaps where it had no step to run (an evaluation between epochs, set-up).
//
// The Profiler feeds it and every figure of the run reads it: the report, the progress line, the done line,
// the JSON and compare.
#pragma once
#include <cstdint>

namespace liftoff {

struct ThroughputFigures {
  int64_t steps = 0;
  int64_t images = 0;
  double seconds = 0.0;  // the steps' spans (above), summed
  double images_per_second() const { return seconds > 0 ? static_cast<double>(images) / seconds : 0.0; }
};

class ThroughputMeter {
 public:
  // The next step, in step order: when the host began it and when the device finished it (steady_clock
  // seconds), its images, and whether it is a measured step (after the warm-up) or a warm-up step.
  void add_step(double begin_s, double device_end_s, int64_t images, bool measured);
  // The measured steps' figures, or the warm-up's while no measured step was added (a run no longer than
  // its warm-up is reported on all its steps, as the Profiler's summary does).
  ThroughputFigures figures() const;

 private:
  ThroughputFigures measured_, warmup_;
  double last_end_s_ = 0.0;
  bool any_ = false;
};

}  // namespace liftoff
