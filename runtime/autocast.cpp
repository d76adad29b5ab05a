#include "runtime/autocast.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "runtime/autograd.h"
#include "runtime/branches.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/weight_cast.h"
#endif

namespace liftoff {

namespace {
thread_local bool autocast_on = false;
thread_local DType autocast_dtype = DType::f32;
std::atomic<uint64_t> weight_version{0};

// Every live HalfWeightCache. The mutex also guards the caches' state, which a batched refresh started by
// another cache writes.
struct CacheRegistry {
  std::mutex mutex;
  std::unordered_set<HalfWeightCache*> caches;
};

CacheRegistry& registry() {
  static auto* r = new CacheRegistry;  // leaked: caches in static objects may outlive other statics
  return *r;
}

#if LIFTOFF_WITH_CUDA
bool batched_casts() {
  return config::get_string(config::Knob::weight_cast).value_or("batched") == "batched";
}
#endif
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

bool autocast_applies(const std::vector<Tensor>& operands, DType* dtype) {
  if (!autocast_enabled(dtype) || operands.empty() || !operands[0].defined() || !operands[0].is_cuda()) {
    return false;
  }
  bool any_f32 = false;
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    if (t.dtype() == DType::f64) return false;
    any_f32 = any_f32 || t.dtype() == DType::f32;
  }
  return any_f32;
}

void advance_weight_version() {
  weight_version.fetch_add(1, std::memory_order_relaxed);
}

// The refresh paths, with the registry's lock held.
struct HalfWeightCache::Refresh {
  static bool current(const HalfWeightCache& c, const Tensor& master, DType dtype, MemoryFormat format,
                      uint64_t now) {
    // The storage pointer guards against a master moved to another device or reloaded.
    return c.half_.defined() && c.version_ == now && c.dtype_ == dtype && c.format_ == format &&
           c.master_data_ == master.raw_data();
  }

  // Today's master of `c` when it is still the tensor and storage `c` last cast; undefined otherwise.
  static Tensor live_master(const HalfWeightCache& c) {
    std::shared_ptr<TensorImpl> impl = c.master_.lock();
    if (impl == nullptr) return Tensor();
    Tensor master(std::move(impl));
    return master.raw_data() == c.master_data_ ? master : Tensor();
  }

  // One cast, allocating the copy (every first copy, the CPU, LIFTOFF_WEIGHT_CAST=each, and what a batched
  // refresh cannot take).
  static void each(HalfWeightCache& c, const Tensor& master, DType dtype, MemoryFormat format, uint64_t now) {
    Tensor half = Tensor::empty(master.shape(), dtype, master.device(), format);
    half.copy_(master.detach());
    c.half_ = std::move(half);
    c.version_ = now;
    c.refresher_ = std::this_thread::get_id();
    c.dtype_ = dtype;
    c.format_ = format;
    c.master_data_ = master.raw_data();
    c.master_ = master.impl_ptr();
    record_shared_state(&c);  // later concurrent branches read this copy
  }

#if LIFTOFF_WITH_CUDA
  struct Item {
    HalfWeightCache* cache;
    Tensor master;
    Tensor target;  // what the cast writes
  };

  // The stale caches a refresh started by `caller` (asked for `master` in dtype/format) takes along: made
  // before, on master's device, in dtype, master unchanged, a copy the batched kernel can write.
  static std::vector<Item> stale_caches(const CacheRegistry& r, const HalfWeightCache* caller,
                                        const Tensor& master, DType dtype, MemoryFormat format,
                                        uint64_t now) {
    std::vector<Item> items;
    for (HalfWeightCache* c : r.caches) {
      if (!c->half_.defined() || c->version_ == now || c->dtype_ != dtype) continue;
      // Another thread's copies are ordered by its own branches' events, which this thread's stream would
      // bypass: they refresh themselves.
      if (c != caller && c->refresher_ != std::this_thread::get_id()) continue;
      if (c->half_.device() != master.device()) continue;
      Tensor m;
      if (c != caller) {
        m = live_master(*c);
      } else if (c->format_ == format && c->master_data_ == master.raw_data()) {
        m = master;
      }
      if (m.defined() && cuda::weight_cast_supported(m, c->half_))
        items.push_back({c, std::move(m), Tensor()});
    }
    return items;
  }

  // The cache's own copy when nobody else holds it, so the step's copies keep their addresses; a fresh one
  // when it is shared (a copied cache, a graph still saved for backward) or while capturing (a graph must
  // write only memory of its own pool: a block of the shared pool may be freed and reused while it replays).
  static Tensor target(const HalfWeightCache& c) {
    const Tensor& h = c.half_;
    if (!graph_capture_active() && h.impl_ptr().use_count() == 1 && h.storage().use_count() == 1) return h;
    return Tensor::empty(h.shape(), h.dtype(), h.device(), c.format_);
  }

  // Refreshes the stale caches in one launch (several for very long lists); true when `caller` was one.
  static bool batched(const CacheRegistry& r, HalfWeightCache* caller, const Tensor& master, DType dtype,
                      MemoryFormat format, uint64_t now) {
    std::vector<Item> items = stale_caches(r, caller, master, dtype, format, now);
    if (items.empty()) return false;
    std::vector<Tensor> masters, targets;
    for (Item& item : items) {
      item.target = target(*item.cache);
      masters.push_back(item.master);
      targets.push_back(item.target);
    }
    cuda::cast_weights(masters, targets);  // nothing is committed before the launch succeeded
    if (graph_capture_active()) {
      // The graph reads these masters and writes these copies at every replay, also after the modules they
      // belong to are gone (not all of them are the captured code's own): it keeps their memory.
      for (const Item& item : items) {
        retain_for_captured_graph(std::make_shared<const Storage>(item.master.storage()));
        retain_for_captured_graph(std::make_shared<const Storage>(item.target.storage()));
      }
    }
    bool caller_refreshed = false;
    for (Item& item : items) {
      HalfWeightCache& c = *item.cache;
      c.half_ = std::move(item.target);
      c.version_ = now;
      c.refresher_ = std::this_thread::get_id();
      record_shared_state(&c);
      if (&c == caller) {
        c.master_ = master.impl_ptr();
        caller_refreshed = true;
      }
    }
    return caller_refreshed;
  }
#endif
};

HalfWeightCache::HalfWeightCache() {
  CacheRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.caches.insert(this);
}

HalfWeightCache::~HalfWeightCache() {
  CacheRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.caches.erase(this);
}

HalfWeightCache::HalfWeightCache(const HalfWeightCache& other) {
  CacheRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.caches.insert(this);
  assign_state(other);
}

HalfWeightCache& HalfWeightCache::operator=(const HalfWeightCache& other) {
  if (this == &other) return *this;
  std::lock_guard<std::mutex> lock(registry().mutex);
  assign_state(other);
  return *this;
}

HalfWeightCache::HalfWeightCache(HalfWeightCache&& other) {
  CacheRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.caches.insert(this);
  assign_state(other);
  other.clear_state();
}

HalfWeightCache& HalfWeightCache::operator=(HalfWeightCache&& other) {
  if (this == &other) return *this;
  std::lock_guard<std::mutex> lock(registry().mutex);
  assign_state(other);
  other.clear_state();
  return *this;
}

// Caller holds the registry's lock (both functions).
void HalfWeightCache::clear_state() {
  half_ = Tensor();
  version_ = ~uint64_t{0};
  master_data_ = nullptr;
  master_.reset();
  refresher_ = std::thread::id();
}

void HalfWeightCache::assign_state(const HalfWeightCache& other) {
  half_ = other.half_;
  version_ = other.version_;
  dtype_ = other.dtype_;
  format_ = other.format_;
  master_data_ = other.master_data_;
  master_ = other.master_;
  refresher_ = other.refresher_;
}

Tensor HalfWeightCache::get(const Tensor& master, DType dtype, MemoryFormat format) {
  if (!master.defined()) return master;
  if (format == MemoryFormat::channels_last && master.dim() != 4) format = MemoryFormat::contiguous;
  Tensor out;
  {
    CacheRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const uint64_t now = weight_version.load(std::memory_order_relaxed);
    if (Refresh::current(*this, master, dtype, format, now)) {
      order_shared_state(this);  // made by an earlier branch on its own stream: wait for it
    } else {
      NoGradGuard no_grad;
      bool refreshed = false;
#if LIFTOFF_WITH_CUDA
      refreshed =
          master.is_cuda() && batched_casts() && Refresh::batched(r, this, master, dtype, format, now);
#endif
      if (!refreshed) Refresh::each(*this, master, dtype, format, now);
    }
    out = half_.detach();
  }
  if (should_record({master})) {
    // A leaf master (a parameter) gets the half gradient as it is: its accumulator converts it, on CUDA in
    // one batch with the others at the end of the backward (runtime/leaf_grad_batch.h). A master computed
    // by other ops gets its own dtype, as those ops' backwards expect.
    record(out, "autocast_weight", {master},
           [master_dtype = master.dtype(), leaf = master.grad_fn() == nullptr](const Tensor& gy,
                                                                               const NeedsGrad&) {
             return std::vector<Tensor>{leaf ? gy : gy.to(master_dtype)};
           });
  }
  return out;
}

size_t half_weight_cache_count() {
  CacheRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.caches.size();
}

}  // namespace liftoff
