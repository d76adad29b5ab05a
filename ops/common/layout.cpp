#include "ops/common/layout.h"

#include "runtime/config.h"

namespace liftoff {

namespace {}  // namespace

// LIFTOFF_CONV_LAYOUT=input keeps the input's layout (the NCHW reference for A/B runs and tests).
bool conv_layout_follows_input() {
  return config::get_string(config::Knob::conv_layout).value_or("auto") == "input";
}

MemoryFormat conv_memory_format(const Tensor& x) {
  if (!x.is_cuda() || x.dim() != 4 || x.dtype() == DType::f64) return MemoryFormat::contiguous;
  return conv_layout_follows_input() ? x.memory_format() : MemoryFormat::channels_last;
}

}  // namespace liftoff
