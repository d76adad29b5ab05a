#include "models/train/ddp.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <unordered_map>

#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/graph.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/context.h"
#include "runtime/cuda/event.h"
#endif

namespace liftoff {

using distributed::ReduceOp;
using distributed::Work;

std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketParam>& params, size_t cap_bytes,
                                                size_t first_cap_bytes) {
  LIFTOFF_CHECK(cap_bytes > 0, ValueError, "DDP: bucket cap must be positive");
  if (first_cap_bytes == 0) first_cap_bytes = cap_bytes;
  std::vector<std::vector<size_t>> buckets;
  // One open bucket per dtype (a flat buffer has one dtype), with its byte count.
  std::vector<std::pair<DType, std::pair<std::vector<size_t>, size_t>>> open;
  const auto close = [&](size_t slot) {
    buckets.push_back(std::move(open[slot].second.first));
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(slot));
  };
  for (size_t k = params.size(); k-- > 0;) {
    const BucketParam& p = params[k];
    const size_t cap = buckets.empty() ? first_cap_bytes : cap_bytes;
    size_t slot = open.size();
    for (size_t s = 0; s < open.size(); ++s) {
      if (open[s].first == p.dtype) slot = s;
    }
    if (p.bytes >= cap) {
      if (slot < open.size()) close(slot);  // keep launch order = readiness order
      buckets.push_back({k});
      continue;
    }
    if (slot < open.size() && open[slot].second.second + p.bytes > cap) {
      close(slot);
      slot = open.size();
    }
    if (slot == open.size()) open.push_back({p.dtype, {{}, 0}});
    open[slot].second.first.push_back(k);
    open[slot].second.second += p.bytes;
  }
  // Whatever is left closes in the order it was opened.
  while (!open.empty()) close(0);
  return buckets;
}

namespace {
using Clock = std::chrono::steady_clock;

// One synchronised step whose timings are read once its events completed.
struct StepRecord {
  std::vector<std::unique_ptr<Work>> works;
#if LIFTOFF_WITH_CUDA
  std::unique_ptr<cuda::Event> backward_end, after_wait;  // both on the compute stream
#endif
  double host_wait_ms = 0.0;
};
constexpr size_t kMaxUnresolvedSteps = 16;
}  // namespace

struct DistributedDataParallel::State {
  distributed::ProcessGroup* group = nullptr;
  bool* require_sync = nullptr;
  Profiler* profiler = nullptr;
  bool mark_open = false;  // this round's allreduce mark has begun
  Device device;
  std::vector<Tensor> params;
  std::unordered_map<const TensorImpl*, size_t> index_of;
  std::vector<std::vector<size_t>> buckets;
  std::vector<Tensor> flat;        // per bucket: the flat buffer
  std::vector<Tensor> wire;        // per bucket: its bf16 copy that is all-reduced (undefined: flat itself)
  std::vector<size_t> bucket_of;   // per parameter
  std::vector<int64_t> offset_of;  // per parameter: element offset in its bucket
  std::vector<Tensor> slice_of;    // per parameter: its view of the bucket (param shape)
  // Round state (between synchronize_gradients calls).
  std::vector<bool> ready;
  std::vector<size_t> missing;  // per bucket: parameters not ready yet
  size_t next_launch = 0;
  std::vector<std::unique_ptr<Work>> works;  // per bucket, for the round
  int64_t round_first_call = 0;              // stats.all_reduce_calls when the round began
  int64_t round_first_bytes = 0;
  // The round recorded by the last graph capture (what each replay issues again).
  int64_t captured_calls = 0, captured_bytes = 0;
  bool capturing = false;  // from begin_capture until the next abort_capture
  DDPStats before_capture;
  // Stats.
  DDPStats stats;
  std::deque<StepRecord> unresolved;

  void copy_in(size_t i, const Tensor& grad) {
    const Tensor& dst = slice_of[i];
    if (grad.defined()) {
      if (grad.raw_data() != dst.raw_data()) dst.copy_(grad);  // skip when .grad already is the slice
    } else {
      dst.zero_();  // no gradient here: contribute zeros so every rank reduces the same buffer
    }
  }

  // The allreduce mark starts when the comm stream may start the first bucket (after what compute queued).
  void begin_mark() {
    if (profiler == nullptr || !profiler->in_step() || !device.is_cuda()) return;
#if LIFTOFF_WITH_CUDA
    cuda::Event ready;
    ready.record(cuda::compute_stream(device.index));
    ready.wait(cuda::comm_stream(device.index));
#endif
    profiler->begin_device_stage(Stage::allreduce, StreamKind::comm);
    mark_open = true;
  }

  void launch_ready() {
    while (next_launch < buckets.size() && missing[next_launch] == 0) {
      const Tensor& wired = wire[next_launch].defined() ? wire[next_launch] : flat[next_launch];
      if (wire[next_launch].defined()) wire[next_launch].copy_(flat[next_launch]);  // f32 -> bf16
      if (next_launch == 0) begin_mark();  // after the cast: the mark times the communication
      works[next_launch] = group->all_reduce(wired, ReduceOp::avg);
      ++stats.all_reduce_calls;
      stats.bytes_reduced += static_cast<int64_t>(wired.nbytes());
      ++next_launch;
    }
  }

  void on_grad_ready(const Tensor& leaf) {
    if (!*require_sync) return;
    const auto it = index_of.find(&leaf.impl());
    if (it == index_of.end()) return;
    const size_t i = it->second;
    LIFTOFF_CHECK(
        !ready[i], ValueError, "DDP: the gradient of parameter ", i,
        " became ready twice before synchronize_gradients(); with gradient accumulation turn sync off "
        "(set_require_sync(false)) for all but the last micro-batch");
    ready[i] = true;
    copy_in(i, leaf.grad());
    --missing[bucket_of[i]];
    launch_ready();
  }

  void resolve() {
    while (!unresolved.empty()) {
      StepRecord& r = unresolved.front();
#if LIFTOFF_WITH_CUDA
      if (r.after_wait) {
        if (!r.after_wait->query()) return;
        double comm = 0.0;
        for (auto& w : r.works) {
          const double ms = w->elapsed_ms();
          if (ms > 0) comm += ms;
        }
        const double exposed =
            std::max(0.0, static_cast<double>(cuda::Event::elapsed_ms(*r.backward_end, *r.after_wait)));
        stats.comm_ms += comm;
        stats.exposed_ms += exposed;
        stats.overlapped_ms += std::max(0.0, comm - exposed);
        ++stats.timed_steps;
        unresolved.pop_front();
        continue;
      }
#endif
      stats.exposed_ms += r.host_wait_ms;
      ++stats.timed_steps;
      unresolved.pop_front();
    }
  }
};

DistributedDataParallel::DistributedDataParallel(Module& module, distributed::ProcessGroup& group,
                                                 DDPOptions options)
    : module_(module), group_(group), state_(std::make_shared<State>()) {
  LIFTOFF_CHECK(options.bucket_cap_mb > 0, ValueError, "DDP: bucket_cap_mb must be positive, got ",
                options.bucket_cap_mb);
  LIFTOFF_CHECK(options.first_bucket_cap_mb > 0, ValueError,
                "DDP: first_bucket_cap_mb must be positive, got ", options.first_bucket_cap_mb);
  State& s = *state_;
  s.group = &group;
  s.require_sync = &require_sync_;
  s.device = group.device();
  s.stats.device_timed = s.device.is_cuda();
  for (const auto& [name, p] : module.named_parameters()) {
    LIFTOFF_CHECK(p.device() == s.device, DeviceError, "DDP: parameter ", name, " is on ", p.device().str(),
                  " but the process group works on ", s.device.str(), "; call model.to(device) first");
    LIFTOFF_CHECK(p.is_contiguous(), ValueError, "DDP: parameter ", name, " ", shape_str(p.shape()),
                  " is not contiguous (", p.is_channels_last() ? "channels-last" : "strided",
                  "); the gradient buckets hold contiguous slices: call model.to(MemoryFormat::contiguous) "
                  "before wrapping the model");
    if (!p.requires_grad()) continue;
    s.index_of[&p.impl()] = s.params.size();
    s.params.push_back(p);
  }
  std::vector<BucketParam> sizes;
  for (const Tensor& p : s.params) sizes.push_back({p.nbytes(), p.dtype()});
  const auto cap = static_cast<size_t>(options.bucket_cap_mb * 1024.0 * 1024.0);
  const auto first_cap = static_cast<size_t>(options.first_bucket_cap_mb * 1024.0 * 1024.0);
  s.buckets = assign_buckets(sizes, std::max<size_t>(cap, 1), std::max<size_t>(first_cap, 1));
  s.bucket_of.assign(s.params.size(), 0);
  s.offset_of.assign(s.params.size(), 0);
  s.slice_of.resize(s.params.size());
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    int64_t numel = 0;
    for (size_t i : s.buckets[b]) {
      s.bucket_of[i] = b;
      s.offset_of[i] = numel;
      numel += s.params[i].numel();
    }
    const DType dtype = s.params[s.buckets[b].front()].dtype();
    s.flat.push_back(Tensor::zeros({numel}, dtype, s.device));
    s.wire.push_back(options.bf16_compress && dtype == DType::f32
                         ? Tensor::zeros({numel}, DType::bf16, s.device)
                         : Tensor());
    for (size_t i : s.buckets[b]) {
      const Tensor& p = s.params[i];
      s.slice_of[i] = s.flat[b].slice(0, s.offset_of[i], s.offset_of[i] + p.numel()).view(p.shape()).detach();
    }
  }
  s.ready.assign(s.params.size(), false);
  s.missing.resize(s.buckets.size());
  for (size_t b = 0; b < s.buckets.size(); ++b) s.missing[b] = s.buckets[b].size();
  s.works.resize(s.buckets.size());

  if (options.broadcast_at_start && group.world_size() > 1) {
    NoGradGuard no_grad;
    std::vector<std::unique_ptr<Work>> works;
    for (const Tensor& p : module.parameters()) works.push_back(group.broadcast(p, 0));
    for (const Tensor& b : module.buffers()) works.push_back(group.broadcast(b, 0));
    for (auto& w : works) w->wait();
  }
  // The hooks hold a weak reference: a DDP destroyed before its model leaves harmless hooks behind.
  const std::weak_ptr<State> weak = state_;
  for (const Tensor& p : s.params) {
    p.add_grad_ready_hook([weak](const Tensor& leaf) {
      if (auto state = weak.lock()) state->on_grad_ready(leaf);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::set_profiler(Profiler* profiler) {
  state_->profiler = profiler;
}

const std::vector<std::vector<size_t>>& DistributedDataParallel::buckets() const {
  return state_->buckets;
}

void DistributedDataParallel::synchronize_gradients() {
  if (!require_sync_) return;
  State& s = *state_;
  // Parameters whose hook did not fire in this backward: their accumulated gradient (or zeros) goes in now.
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (s.ready[i]) continue;
    s.copy_in(i, s.params[i].grad());
    s.ready[i] = true;
    --s.missing[s.bucket_of[i]];
  }
  s.launch_ready();
  const bool marked = s.mark_open;
  if (marked) {
    s.profiler->end_device_stage(Stage::allreduce, StreamKind::comm);  // after the last bucket
    s.mark_open = false;
  }
  // A captured step's events belong to the graph (querying them is an error): it is not timed here.
  const bool captured = graph_capture_active();
  StepRecord record;
#if LIFTOFF_WITH_CUDA
  const bool cuda_group = s.device.is_cuda() && !captured;
  if (cuda_group) {
    record.backward_end = std::make_unique<cuda::Event>(true);
    record.backward_end->record(cuda::compute_stream(s.device.index));
  }
#endif
  const auto start = Clock::now();
  for (auto& w : s.works) w->wait();
  record.host_wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
#if LIFTOFF_WITH_CUDA
  if (marked) {
    // The compute stream also waits for the end mark (right behind the last bucket): a graph capture must
    // join every node of the comm stream back into the compute stream. After backward_end, so the wait
    // counts as exposed like the buckets' own.
    cuda::Event mark_done;
    mark_done.record(cuda::comm_stream(s.device.index));
    mark_done.wait(cuda::compute_stream(s.device.index));
  }
  if (cuda_group) {
    record.after_wait = std::make_unique<cuda::Event>(true);
    record.after_wait->record(cuda::compute_stream(s.device.index));
  }
#endif
  // bf16 -> f32 behind the waits, outside the exposed communication time.
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    if (s.wire[b].defined()) s.flat[b].copy_(s.wire[b]);
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Tensor grad = s.params[i].grad();
    if (!grad.defined() || grad.raw_data() != s.slice_of[i].raw_data() ||
        grad.dtype() != s.slice_of[i].dtype()) {
      s.params[i].set_grad(s.slice_of[i]);
    }
  }
  record.works = std::move(s.works);
  s.works.clear();
  s.works.resize(s.buckets.size());
  if (captured) {
    s.captured_calls = s.stats.all_reduce_calls - s.round_first_call;
    s.captured_bytes = s.stats.bytes_reduced - s.round_first_bytes;
  } else {
    s.unresolved.push_back(std::move(record));
    if (s.unresolved.size() > kMaxUnresolvedSteps) s.unresolved.pop_front();  // never waited for: not timed
    s.resolve();
  }
  s.ready.assign(s.params.size(), false);
  for (size_t b = 0; b < s.buckets.size(); ++b) s.missing[b] = s.buckets[b].size();
  s.next_launch = 0;
  ++s.stats.sync_steps;
  s.round_first_call = s.stats.all_reduce_calls;
  s.round_first_bytes = s.stats.bytes_reduced;
}

void DistributedDataParallel::after_replay() {
  State& s = *state_;
  ++s.stats.sync_steps;
  s.stats.all_reduce_calls += s.captured_calls;
  s.stats.bytes_reduced += s.captured_bytes;
  s.round_first_call = s.stats.all_reduce_calls;
  s.round_first_bytes = s.stats.bytes_reduced;
  group_.watch_graph_replay("all-reduce in the captured training step");
}

void DistributedDataParallel::before_replay(std::vector<void*>* record_events) {
  (void)record_events;
  group_.check_healthy();
}

void DistributedDataParallel::begin_capture() {
  State& s = *state_;
  s.before_capture = s.stats;
  s.capturing = true;
}

void DistributedDataParallel::end_capture(std::vector<void*>* record_events) {
  (void)record_events;  // the round stays revocable until the graph is instantiated (abort_capture)
}

void DistributedDataParallel::abort_capture() noexcept {
  State& s = *state_;
  if (!s.capturing) return;
  s.capturing = false;
  abandon_round();
  // Nothing recorded in the failed capture ran: its sync and launches are not counted (the eager rerun is).
  s.stats.sync_steps = s.before_capture.sync_steps;
  s.stats.all_reduce_calls = s.before_capture.all_reduce_calls;
  s.stats.bytes_reduced = s.before_capture.bytes_reduced;
  s.round_first_call = s.stats.all_reduce_calls;
  s.round_first_bytes = s.stats.bytes_reduced;
}

void DistributedDataParallel::abandon_round() noexcept {
  State& s = *state_;
  if (s.mark_open) {
    s.profiler->cancel_device_stage(Stage::allreduce, StreamKind::comm);
    s.mark_open = false;
  }
  s.works.clear();  // a captured Work that never ran is dropped without a wait; an eager one still orders
  s.works.resize(s.buckets.size());
  s.ready.assign(s.params.size(), false);
  for (size_t b = 0; b < s.buckets.size(); ++b) s.missing[b] = s.buckets[b].size();
  s.next_launch = 0;
  // Launches of the abandoned round did not happen (a capture) or are not a completed sync: uncount them.
  s.stats.all_reduce_calls = s.round_first_call;
  s.stats.bytes_reduced = s.round_first_bytes;
}

void DistributedDataParallel::all_reduce_max(const Tensor& t) {
  group_.all_reduce(t, ReduceOp::max)->wait();
}

void DistributedDataParallel::sync_found_inf(const GradScaler& scaler) {
  if (!scaler.enabled()) return;  // a disabled scaler never skips: nothing to agree on
  all_reduce_max(scaler.found_inf());
}

void DistributedDataParallel::broadcast_buffers() {
  if (group_.world_size() == 1) return;
  std::vector<std::unique_ptr<Work>> works;
  for (const Tensor& b : module_.buffers()) works.push_back(group_.broadcast(b, 0));
  for (auto& w : works) w->wait();
}

DDPStats DistributedDataParallel::stats() const {
  state_->resolve();
  return state_->stats;
}

void DistributedDataParallel::reset_stats() {
  State& s = *state_;
  s.resolve();
  const bool timed = s.stats.device_timed;
  s.stats = DDPStats{};
  s.stats.device_timed = timed;
  s.round_first_call = 0;
  s.round_first_bytes = 0;
  s.unresolved.clear();
}

EvalTotals all_reduce_eval(distributed::ProcessGroup& group, const EvalTotals& local) {
  // f64 holds the counts exactly up to 2^53 and the loss sum without f32 rounding.
  Tensor totals = Tensor::from_vector<double>(
      {static_cast<double>(local.correct), static_cast<double>(local.count), local.loss_sum}, {3},
      Device::cpu());
  if (group.device().is_cuda()) totals = totals.to(group.device());
  group.all_reduce(totals, ReduceOp::sum)->wait();
  const std::vector<double> host = totals.to_vector<double>();  // evaluation: a host read is fine here
  EvalTotals out;
  out.correct = static_cast<int64_t>(host[0]);
  out.count = static_cast<int64_t>(host[1]);
  out.loss_sum = host[2];
  return out;
}

std::vector<double> all_gather_value(distributed::ProcessGroup& group, double value) {
  // One slot per rank, zeros elsewhere: a sum over the group fills every slot.
  std::vector<double> slots(static_cast<size_t>(group.world_size()), 0.0);
  slots[static_cast<size_t>(group.rank())] = value;
  Tensor t = Tensor::from_vector<double>(slots, {group.world_size()}, Device::cpu());
  if (group.device().is_cuda()) t = t.to(group.device());
  group.all_reduce(t, ReduceOp::sum)->wait();
  return t.to_vector<double>();
}

}  // namespace liftoff
