#include "runtime/capture.h"

namespace liftoff {

namespace {
thread_local bool capturing_on_this_thread = false;
thread_local int capture_device_on_this_thread = -1;
thread_local bool warmup_on_this_thread = false;
thread_local bool quick_tuning_on_this_thread = false;
thread_local std::vector<std::shared_ptr<const void>>* retainer_on_this_thread = nullptr;
}  // namespace

GraphWarmupScope::GraphWarmupScope(bool active) : previous_(warmup_on_this_thread) {
  if (active) warmup_on_this_thread = true;
}
GraphWarmupScope::~GraphWarmupScope() {
  warmup_on_this_thread = previous_;
}
bool graph_warmup_active() {
  return warmup_on_this_thread;
}

QuickTuningScope::QuickTuningScope(bool active) : previous_(quick_tuning_on_this_thread) {
  if (active) quick_tuning_on_this_thread = true;
}
QuickTuningScope::~QuickTuningScope() {
  quick_tuning_on_this_thread = previous_;
}
bool quick_tuning_active() {
  return quick_tuning_on_this_thread;
}

bool graph_capture_active() {
  return capturing_on_this_thread;
}

int graph_capture_device() {
  return capturing_on_this_thread ? capture_device_on_this_thread : -1;
}

void check_not_capturing(const char* what) {
  if (!capturing_on_this_thread) return;
  throw GraphCaptureError(
      str_cat(what,
              " cannot be captured in a CUDA graph (a replay would repeat the captured value "
              "or skip the host work); run this step eagerly (--cuda-graphs off)"));
}

void retain_for_captured_graph(std::shared_ptr<const void> holder) {
  if (capturing_on_this_thread && retainer_on_this_thread != nullptr)
    retainer_on_this_thread->push_back(std::move(holder));
}

namespace detail {
void set_capture_retainer(std::vector<std::shared_ptr<const void>>* retained) {
  retainer_on_this_thread = retained;
}
void set_capture_state(bool capturing, int device) {
  capturing_on_this_thread = capturing;
  capture_device_on_this_thread = capturing ? device : -1;
}
}  // namespace detail

}  // namespace liftoff
