#include "tools/train/memory_check.h"

#include <algorithm>
#include <cstdio>

#include "runtime/autograd.h"
#include "runtime/platform/host_memory.h"

namespace liftoff::tools {

namespace {

std::string gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

StepMemoryEstimate estimate_cpu_step_memory(Module& model, const Flags& f, const TrainData& data) {
  StepMemoryEstimate e;
  const int64_t channels = data.channels, height = data.height, width = data.width;
  const int64_t probe_batch = std::min<int64_t>(f.batch, 2);
  const bool was_training = model.is_training();
  model.eval();  // no running statistics updated, no dropout generator advanced
  int64_t grown = -1;
  try {
    Tensor x = Tensor::zeros({probe_batch, channels, height, width});
    const int64_t before = platform::heap_bytes_in_use();
    Tensor y = model(x);  // grad mode on: the graph keeps what backward would need
    const int64_t after = platform::heap_bytes_in_use();
    if (before >= 0 && after >= 0) grown = std::max<int64_t>(after - before, 0);
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  if (grown < 0) return e;
  const int64_t sample = channels * height * width;
  int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += static_cast<int64_t>(p.nbytes());
  e.activations_per_image = grown / probe_batch + sample * static_cast<int64_t>(sizeof(float));
  e.batch = std::min(f.batch, std::max<int64_t>(data.train_size, 1));
  e.activations = e.activations_per_image * e.batch * 3 / 2;
  e.loader = static_cast<int64_t>(effective_prefetch(f)) * e.batch * sample *
             (1 + static_cast<int64_t>(sizeof(float)));
  const int64_t optimizer_copies = f.optimizer == "adamw" ? 2 : (f.momentum > 0 ? 1 : 0);
  e.training_state = params * (1 + optimizer_copies);
  return e;
}

void check_host_memory(Module& model, const Flags& f, Device device, const TrainData& data) {
  if (!device.is_cpu()) return;
  const StepMemoryEstimate e = estimate_cpu_step_memory(model, f, data);
  const platform::HostMemoryBudget budget = platform::host_memory_budget();
  if (e.total() == 0 || budget.available_bytes < 0 || e.total() <= budget.available_bytes) return;
  // The largest batch whose step fits, everything else unchanged.
  const int64_t per_image = e.activations_per_image * 3 / 2 + static_cast<int64_t>(effective_prefetch(f)) *
                                                                  data.channels * data.height * data.width *
                                                                  5;
  const int64_t room = budget.available_bytes - e.training_state;
  const int64_t fits = per_image > 0 && room > 0 ? room / per_image : 0;
  throw OutOfMemoryError(str_cat(
      "a training step on the CPU needs about ", gb(e.total()), " of host memory (activations ~",
      e.activations_per_image / 1024, " KB per image x batch ", e.batch,
      " x 1.5 for backward = ", gb(e.activations), ", loader buffers ", gb(e.loader), " for --prefetch ",
      effective_prefetch(f), ", gradients and optimizer state ", gb(e.training_state), "), but only ",
      gb(budget.available_bytes), " are available (", budget.limited_by, "); ",
      fits > 0 ? str_cat("use --batch ", fits, " or less") : std::string("use a smaller --batch"),
      " (with --accum to keep the effective batch), a smaller --prefetch or --image-size"));
}

}  // namespace liftoff::tools
