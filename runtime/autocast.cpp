#include "runtime/autocast.h"

#include <atomic>

#include "runtime/autograd.h"
#include "runtime/branches.h"

namespace liftoff {

namespace {
thread_local bool autocast_on = false;
thread_local DType autocast_dtype = DType::f32;
std::atomic<uint64_t> weight_version{0};
}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_enabled_(autocast_on), previous_dtype_(autocast_dtype) {
  LIFTOFF_CHECK(dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32, DTypeError,
                "autocast: dtype must be f16, bf16 or f32 (off), got ", dtype_name(dtype));
  autocast_on = dtype != DType::f32;
  autocast_dtype = dtype;
}

AutocastGuard::~AutocastGuard() {
  autocast_on = previous_enabled_;
  autocast_dtype = previous_dtype_;
}

bool autocast_enabled(DType* dtype) {
  if (autocast_on && dtype != nullptr) *dtype = autocast_dtype;
  return autocast_on;
}

void advance_weight_version() {
  weight_version.fetch_add(1, std::memory_order_relaxed);
}

Tensor HalfWeightCache::get(const Tensor& master, DType dtype, MemoryFormat format) {
  if (!master.defined()) return master;
  const uint64_t now = weight_version.load(std::memory_order_relaxed);
  // The storage pointer guards against a master moved to another device or reloaded.
  if (format == MemoryFormat::channels_last && master.dim() != 4) format = MemoryFormat::contiguous;
  if (!half_.defined() || version_ != now || dtype_ != dtype || format_ != format ||
      master_data_ != master.raw_data()) {
    NoGradGuard no_grad;
    half_ = Tensor::empty(master.shape(), dtype, master.device(), format);
    half_.copy_(master.detach());
    version_ = now;
    dtype_ = dtype;
    format_ = format;
    master_data_ = master.raw_data();
    record_shared_state(this);  // later concurrent branches read this copy
  } else {
    order_shared_state(this);  // made by an earlier branch on its own stream: wait for it
  }
  Tensor out = half_.detach();
  if (should_record({master})) {
    record(out, "autocast_weight", {master},
           [master_dtype = master.dtype()](const Tensor& gy, const NeedsGrad&) {
             return std::vector<Tensor>{gy.to(master_dtype)};
           });
  }
  return out;
}

}  // namespace liftoff
