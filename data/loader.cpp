#include "data/loader.h"

#include "runtime/platform/cpu_usage.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "data/augment.h"
#include "data/augment_launch.h"
#include "runtime/platform/thread_name.h"
#include "runtime/stream.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Samples per augment_batch_into call on a worker: at most augment.cpp's parallel grain, so the call runs
// inline on the worker instead of opening an OpenMP team per worker (which would oversubscribe the cores).
int64_t inline_chunk(int64_t sample_elems) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, sample_elems));
}

// Normalise-only as an augmentation config: no crop offset, never a flip or an erase.
AugmentConfig identity_config() {
  AugmentConfig c;
  c.pad = 0;
  c.flip_prob = 0.0f;
  c.erase_prob = 0.0f;
  return c;
}
}  // namespace

AugmentMode parse_augment_mode(const std::string& text) {
  if (text == "auto") return AugmentMode::auto_;
  if (text == "gpu") return AugmentMode::gpu;
  if (text == "cpu") return AugmentMode::cpu;
  if (text == "none") return AugmentMode::none;
  throw ValueError(str_cat("augment mode '", text, "' is not auto, gpu, cpu or none"));
}

const char* augment_mode_name(AugmentMode mode) {
  switch (mode) {
    case AugmentMode::auto_:
      return "auto";
    case AugmentMode::gpu:
      return "gpu";
    case AugmentMode::cpu:
      return "cpu";
    case AugmentMode::none:
      return "none";
  }
  return "?";
}

struct DataLoader::Slot : RingSlot {
  std::vector<int64_t> indices;  // the samples that made it into the batch (all, unless skipped)
  int64_t count = 0;
  // CPU target: fresh tensors per batch, moved into the Batch. CUDA target: fixed host buffers of a full
  // batch (pinned unless turned off), reused after their copy completed: images_u8 [B, C, H, W] u8 (scratch
  // in cpu mode), input [B, C, H, W] f32 (cpu mode), meta [2B] i64 = count labels, then count indices.
  Tensor images_u8;
  Tensor labels;
  Tensor input;
  Tensor meta;
  // CUDA target: events of the device (made once in init; CPU events, never recorded, otherwise).
  bool copy_pending = false;  // copy_done recorded and not yet waited for by a refilling worker
  bool copy_timing_pending = false;
  bool aug_timing_pending = false;
  Event copy_start, copy_done, aug_start, aug_end, consumed;
  Storage staging_pixels;  // device: what the copy writes and the kernel reads
  Storage staging_meta;
};

DataLoader::DataLoader(ImageDataset dataset, LoaderOptions options)
    : memory_(std::move(dataset)), options_(std::move(options)) {
  prefetch_ = NextEpochPrefetch(options_.shuffle, options_.epochs);
  LIFTOFF_CHECK(memory_.images.defined() && memory_.labels.defined(), ValueError,
                "DataLoader: the data set has no images or labels");
  LIFTOFF_CHECK(
      memory_.images.dtype() == DType::u8 && memory_.images.dim() == 4 && memory_.images.device().is_cpu(),
      ShapeError, "DataLoader: expected u8 CPU images [N, C, H, W], got ", dtype_name(memory_.images.dtype()),
      " ", shape_str(memory_.images.shape()), " on ", memory_.images.device().str());
  LIFTOFF_CHECK(memory_.labels.dtype() == DType::i64 && memory_.labels.dim() == 1 &&
                    memory_.labels.size(0) == memory_.size() && memory_.labels.device().is_cpu(),
                ShapeError, "DataLoader: expected i64 CPU labels [", memory_.size(), "], got ",
                dtype_name(memory_.labels.dtype()), " ", shape_str(memory_.labels.shape()));
  memory_.images = memory_.images.contiguous();
  memory_.labels = memory_.labels.contiguous();
  size_ = memory_.size();
  channels_ = memory_.channels();
  height_ = memory_.height();
  width_ = memory_.width();
  num_classes_ = memory_.num_classes;
  mean_ = memory_.mean;
  stddev_ = memory_.stddev;
  init();
}

DataLoader::DataLoader(std::shared_ptr<const ImageFolder> folder, LoaderOptions options)
    : folder_(std::move(folder)), options_(std::move(options)) {
  prefetch_ = NextEpochPrefetch(options_.shuffle, options_.epochs);
  LIFTOFF_CHECK(folder_ != nullptr, ValueError, "DataLoader: null image folder");
  size_ = folder_->size();
  channels_ = folder_->channels();
  height_ = folder_->height();
  width_ = folder_->width();
  num_classes_ = folder_->num_classes();
  mean_ = folder_->mean();
  stddev_ = folder_->stddev();
  init();
}

void DataLoader::init_device_buffers() {
  const LoaderOptions& o = options_;
  const int64_t sample = channels_ * height_ * width_;
  LIFTOFF_CHECK(channels_ <= cuda::kAugmentMaxChannels, ShapeError, "DataLoader: ", channels_,
                " channels; the CUDA augmentation supports at most ", cuda::kAugmentMaxChannels);
  const auto host = [&](int64_t numel, DType dtype) {
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    if (!o.pin_memory) return Tensor::empty({numel}, dtype, Device::cpu());
    std::shared_ptr<void> block = allocate_pinned_host(bytes);
    void* ptr = block.get();
    return Tensor::from_blob(Storage::wrap(ptr, bytes, Device::cpu(), std::move(block)), {numel}, dtype);
  };
  const int64_t b = o.batch;
  for (int i = 0; i < ring_->size(); ++i) {
    Slot* slot = &ring_->slot_at(i);
    if (mode_ == AugmentMode::cpu) {
      slot->images_u8 = Tensor::empty({b, channels_, height_, width_}, DType::u8, Device::cpu());  // scratch
      slot->input = host(b * sample, DType::f32).view({b, channels_, height_, width_});
    } else {
      slot->images_u8 = host(b * sample, DType::u8).view({b, channels_, height_, width_});
    }
    slot->meta = host(2 * b, DType::i64);
    const size_t pixel_bytes =
        static_cast<size_t>(b * sample) * (mode_ == AugmentMode::cpu ? sizeof(float) : 1);
    slot->staging_pixels = Storage::allocate(pixel_bytes, o.device);
    slot->staging_meta = Storage::allocate(static_cast<size_t>(2 * b) * sizeof(int64_t), o.device);
    slot->copy_start = Event(o.device, /*timing=*/true);
    // Blocking sync: a worker waiting to refill this buffer sleeps instead of spinning a core.
    slot->copy_done = Event(o.device, /*timing=*/true, /*blocking_sync=*/true);
    slot->aug_start = Event(o.device, /*timing=*/true);
    slot->aug_end = Event(o.device, /*timing=*/true);
    slot->consumed = Event(o.device);
  }
}

void DataLoader::init() {
  const LoaderOptions& o = options_;
  LIFTOFF_CHECK(size_ > 0, ValueError, "DataLoader: the data set is empty");
  LIFTOFF_CHECK(o.batch >= 1, ValueError, "DataLoader: batch size ", o.batch,
                " must be at least 1 (--batch)");
  LIFTOFF_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ValueError, "DataLoader: rank ",
                o.rank, " is outside [0, world size ", o.world_size, ")");
  const int64_t world = o.world_size;
  shard_size_ = o.even_shards ? (size_ + world - 1) / world : (size_ - o.rank + world - 1) / world;
  LIFTOFF_CHECK(!o.drop_last || o.batch <= shard_size_, ValueError, "DataLoader: batch size ", o.batch,
                " with drop_last leaves no batch from ", shard_size_, " samples",
                world > 1 ? " (this rank's shard)" : "", "; use a smaller --batch (or --no-drop-last)");
  LIFTOFF_CHECK(o.workers >= 1 && o.workers <= 256, ValueError, "DataLoader: --workers ", o.workers,
                " must be in [1, 256]");
  LIFTOFF_CHECK(o.prefetch >= 1 && o.prefetch <= 256, ValueError, "DataLoader: --prefetch ", o.prefetch,
                " must be in [1, 256]");
  LIFTOFF_CHECK(
      static_cast<int64_t>(mean_.size()) == channels_ && static_cast<int64_t>(stddev_.size()) == channels_,
      ValueError, "DataLoader: ", channels_, " channels but ", mean_.size(), " mean and ", stddev_.size(),
      " std values");
  const bool cuda_target = o.device.is_cuda();
  LIFTOFF_CHECK(!cuda_target || built_with_cuda(), DeviceError, "DataLoader: cannot load to ", o.device.str(),
                ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
  mode_ = o.augment == AugmentMode::auto_ ? (cuda_target ? AugmentMode::gpu : AugmentMode::cpu) : o.augment;
  LIFTOFF_CHECK(mode_ != AugmentMode::gpu || cuda_target, ValueError,
                "DataLoader: --augment gpu needs a CUDA device, got ", o.device.str(), "; use --augment cpu");
  const bool device_kernel = cuda_target && mode_ != AugmentMode::cpu;
  LIFTOFF_CHECK(o.input_dtype == DType::f32 ||
                    (device_kernel && (o.input_dtype == DType::bf16 || o.input_dtype == DType::f16)),
                DTypeError, "DataLoader: input dtype ", dtype_name(o.input_dtype),
                " needs the GPU augmentation (f32 otherwise)");
  if (mode_ == AugmentMode::gpu || mode_ == AugmentMode::cpu) validate_augment_config(o.augment_config);

  ring_ = std::make_unique<BatchRing<Slot>>(o.prefetch);
  if (cuda_target) init_device_buffers();
  stats_.worker_busy_seconds.assign(static_cast<size_t>(o.workers), 0.0);
  worker_busy_ns_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(o.workers));
  for (int w = 0; w < o.workers; ++w) worker_busy_ns_[static_cast<size_t>(w)].store(0);
  threads_.reserve(static_cast<size_t>(o.workers));
  for (int w = 0; w < o.workers; ++w) {
    threads_.emplace_back([this, w] {
      platform::set_current_thread_name("lo-worker-" + std::to_string(w));
      worker_loop(w);
    });
  }
}

DataLoader::~DataLoader() {
  ring_->stop();
  for (std::thread& t : threads_) t.join();
  // The device may still read the pinned buffers (copies) and staging buffers (kernel): wait for exactly
  // those events before the buffers go back to their caches (no-ops for a CPU target). Shutdown, not a step.
  for (int i = 0; i < ring_->size(); ++i) {
    try {
      ring_->slot_at(i).copy_done.synchronize();
      ring_->slot_at(i).consumed.synchronize();
    } catch (const std::exception&) {
      // A failed device cannot be waited for; nothing better to do in a destructor.
    }
  }
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = shard_size_;
  return options_.drop_last ? n / options_.batch : (n + options_.batch - 1) / options_.batch;
}

void DataLoader::start_epoch(int64_t epoch) {
  LIFTOFF_CHECK(epoch >= 0, ValueError, "DataLoader: epoch ", epoch, " is negative");
  if (prefetch_.take(epoch)) return;
  begin_epoch(epoch);
}

void DataLoader::begin_epoch(int64_t epoch) {
  const LoaderOptions& o = options_;
  std::vector<int64_t> order =
      epoch_sample_order(size_, shard_size_, o.shuffle, o.seed, epoch, o.rank, o.world_size, o.even_shards);
  ring_->start_epoch(epoch, batches_per_epoch(), [&] {
    order_ = std::move(order);
    epoch_ = epoch;
  });
}

void DataLoader::worker_loop(int worker) {
  // Named for the report's per-thread CPU use and the trace.
  const platform::ThreadRegistration registration("loader-" + std::to_string(worker));
  BatchRing<Slot>& ring = *ring_;
  std::unique_lock<std::mutex> lock(ring.mutex());
  while (true) {
    // In order: the next batch is claimable once the consumer has released its slot (batch - prefetch).
    ring.work_cv.wait(lock, [&] { return ring.stopped() || ring.claimable(); });
    if (ring.stopped()) return;
    Slot& slot = ring.claim();
    const int64_t begin = slot.batch * options_.batch;
    const int64_t end = std::min<int64_t>(begin + options_.batch, shard_size_);
    const std::vector<int64_t> indices(order_.begin() + begin, order_.begin() + end);
    const int64_t epoch = slot.epoch;
    const bool wait_copy = slot.copy_pending;
    lock.unlock();

    std::exception_ptr error;
    bool copy_waited = true;
    try {
      // The buffer's previous copy must have completed before it is overwritten: wait for that event only.
      copy_waited = !wait_copy;
      if (wait_copy) slot.copy_done.synchronize();
      copy_waited = true;
      const auto start = Clock::now();
      fill(slot, indices, epoch, worker);
      worker_busy_ns_[static_cast<size_t>(worker)].fetch_add(ns_since(start));
    } catch (...) {
      error = std::current_exception();
    }

    lock.lock();
    if (copy_waited) slot.copy_pending = false;
    ring.hand_on(slot, RingSlot::State::ready, error);
  }
}

void DataLoader::fill(Slot& slot, const std::vector<int64_t>& indices, int64_t epoch, int worker) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t sample = channels_ * height_ * width_;
  const bool cuda_target = options_.device.is_cuda();
  Tensor images =
      cuda_target ? slot.images_u8 : Tensor::empty({n, channels_, height_, width_}, DType::u8, Device::cpu());
  std::vector<int64_t> labels;
  labels.reserve(static_cast<size_t>(n));
  slot.indices.clear();
  uint8_t* dst = images.data<uint8_t>();
  const uint8_t* src = memory_.images.defined() ? memory_.images.data<uint8_t>() : nullptr;
  const int64_t* src_labels = memory_.labels.defined() ? memory_.labels.data<int64_t>() : nullptr;
  for (const int64_t index : indices) {
    uint8_t* row = dst + static_cast<int64_t>(labels.size()) * sample;
    if (folder_) {
      if (!folder_->load(index, row)) continue;  // skipped (policy skip), counted by the folder
      labels.push_back(folder_->label(index));
    } else {
      std::memcpy(row, src + index * sample, static_cast<size_t>(sample));
      labels.push_back(src_labels[index]);
    }
    slot.indices.push_back(index);
  }
  const int64_t count = static_cast<int64_t>(labels.size());
  slot.count = count;
  images = images.slice(0, 0, count);

  // Host-side augmentation / normalisation: every CPU-target mode, and cpu mode on a CUDA target.
  if (!cuda_target || mode_ == AugmentMode::cpu) {
    const auto start = Clock::now();
    const AugmentConfig config = mode_ == AugmentMode::none ? identity_config() : options_.augment_config;
    Tensor input = cuda_target
                       ? slot.input.slice(0, 0, count)
                       : Tensor::empty({count, channels_, height_, width_}, DType::f32, Device::cpu());
    const int64_t chunk = inline_chunk(sample);
    for (int64_t lo = 0; lo < count; lo += chunk) {
      const int64_t hi = std::min(count, lo + chunk);
      const std::vector<int64_t> part(slot.indices.begin() + lo, slot.indices.begin() + hi);
      augment_batch_into(images.slice(0, lo, hi), part, options_.seed, epoch, config, mean_, stddev_,
                         input.slice(0, lo, hi));
    }
    if (!cuda_target) slot.input = input;
    cpu_augment_ns_.fetch_add(ns_since(start));
  }
  (void)worker;
  if (cuda_target) {
    int64_t* meta = slot.meta.data<int64_t>();
    std::copy(labels.begin(), labels.end(), meta);
    std::copy(slot.indices.begin(), slot.indices.end(), meta + count);
  } else {
    slot.images_u8 = images;
    slot.labels = Tensor::from_vector(labels, {count});
  }
}

bool DataLoader::next(Batch& out) {
  LIFTOFF_CHECK(epoch_ >= 0, ValueError, "DataLoader: call start_epoch() before next()");
  while (true) {
    if (prefetch_.over()) return false;
    Slot* ready = ring_->wait_ready(&stats_.wait_seconds,
                                    stall_watch_);  // adds under the ring's lock, as stats() reads it
    if (ready == nullptr) {
      prefetch_.after_epoch(epoch_, order_, [&] { begin_epoch(epoch_ + 1); });
      return false;
    }
    Slot& slot = *ready;
    if (slot.count > 0) {
      if (options_.device.is_cuda()) {
        hand_out_cuda(slot, out);
      } else {
        hand_out_cpu(slot, out);
      }
      out.indices = slot.indices;
      out.epoch = slot.epoch;
      out.step_in_epoch = slot.batch;
    }
    const int64_t count = slot.count;
    {
      std::lock_guard<std::mutex> lock(ring_->mutex());
      if (options_.device.is_cuda() && count > 0) slot.copy_pending = true;
      if (count > 0) {
        ++stats_.batches;
        stats_.images += count;
      }
    }
    ring_->consume(slot);
    if (count > 0) return true;
  }
}

void DataLoader::hand_out_cpu(Slot& slot, Batch& out) {
  // Fresh tensors per batch: moving them out means the worker can never overwrite what the caller holds.
  out.images_u8 = std::move(slot.images_u8);
  out.labels = std::move(slot.labels);
  out.input = std::move(slot.input);
  slot.images_u8 = Tensor();
  slot.labels = Tensor();
  slot.input = Tensor();
}

void DataLoader::resolve_timings(Slot& slot) const {
  if (slot.copy_timing_pending && slot.copy_done.query()) {
    stats_.h2d_ms += Event::elapsed_ms(slot.copy_start, slot.copy_done);
    ++stats_.h2d_timed;
    slot.copy_timing_pending = false;
  }
  if (slot.aug_timing_pending && slot.aug_end.query()) {
    stats_.augment_ms += Event::elapsed_ms(slot.aug_start, slot.aug_end);
    ++stats_.augment_timed;
    slot.aug_timing_pending = false;
  }
}

void DataLoader::hand_out_cuda(Slot& slot, Batch& out) {
  const Device device = options_.device;
  const Stream copy = Stream::of(device, StreamKind::copy);
  const Stream compute = Stream::of(device, StreamKind::compute).resolved();
  const int64_t n = slot.count;
  const int64_t sample = channels_ * height_ * width_;
  {
    std::lock_guard<std::mutex> lock(ring_->mutex());
    resolve_timings(slot);  // the events are about to be recorded again; an unfinished timing is dropped
    slot.copy_timing_pending = false;
    slot.aug_timing_pending = false;
  }
  const bool host_augmented = mode_ == AugmentMode::cpu;
  const size_t pixel_bytes = static_cast<size_t>(n * sample) * (host_augmented ? sizeof(float) : 1);
  const size_t meta_bytes = static_cast<size_t>(2 * n) * sizeof(int64_t);
  const void* host_pixels = host_augmented ? slot.input.raw_data() : slot.images_u8.raw_data();

  // The staging buffers are free again once the compute stream finished reading them (device-side wait).
  slot.consumed.wait(copy);
  const auto issue_start = Clock::now();
  slot.copy_start.record(copy);
  copy_async(slot.staging_pixels.data(), host_pixels, pixel_bytes, CopyKind::host_to_device, copy);
  copy_async(slot.staging_meta.data(), slot.meta.raw_data(), meta_bytes, CopyKind::host_to_device, copy);
  slot.copy_done.record(copy);
  const double issue_seconds = static_cast<double>(ns_since(issue_start)) * 1e-9;
  slot.copy_done.wait(compute);

  // Outputs are fresh compute-stream tensors: the caller may keep them while the staging is reused.
  const auto* staged_meta = static_cast<const int64_t*>(slot.staging_meta.data());
  Tensor labels = Tensor::empty({n}, DType::i64, device);
  copy_async(labels.raw_data(), staged_meta, static_cast<size_t>(n) * sizeof(int64_t),
             CopyKind::device_to_device, compute);
  Tensor input;
  if (host_augmented) {
    input = Tensor::empty({n, channels_, height_, width_}, DType::f32, device);
    copy_async(input.raw_data(), slot.staging_pixels.data(), pixel_bytes, CopyKind::device_to_device,
               compute);
  } else {
    input = Tensor::empty({n, channels_, height_, width_}, options_.input_dtype, device);
    slot.aug_start.record(compute);
    cuda::launch_augment(augment_launch(slot, staged_meta, input), compute);
    slot.aug_end.record(compute);
  }
  slot.consumed.record(compute);
  {
    std::lock_guard<std::mutex> lock(ring_->mutex());
    stats_.h2d_bytes += static_cast<int64_t>(pixel_bytes + meta_bytes);
    stats_.h2d_issue_seconds += issue_seconds;
    slot.copy_timing_pending = true;
    slot.aug_timing_pending = !host_augmented;
  }
  out.images_u8 = Tensor();  // documented: not kept on the GPU path
  out.input = input;
  out.labels = labels;
}

cuda::AugmentLaunch DataLoader::augment_launch(const Slot& slot, const int64_t* staged_meta,
                                               const Tensor& input) const {
  cuda::AugmentLaunch a;
  a.images = static_cast<const uint8_t*>(slot.staging_pixels.data());
  a.indices = staged_meta + slot.count;
  a.out = input.raw_data();
  a.out_dtype = options_.input_dtype;
  a.batch = slot.count;
  a.channels = channels_;
  a.height = height_;
  a.width = width_;
  a.seed = options_.seed;
  a.epoch = slot.epoch;
  a.config = options_.augment_config;
  a.augment = mode_ == AugmentMode::gpu;
  for (int64_t c = 0; c < channels_; ++c) {
    a.mean[c] = mean_[static_cast<size_t>(c)];
    a.stddev[c] = stddev_[static_cast<size_t>(c)];
  }
  return a;
}

LoaderStats loader_stats_since(const LoaderStats& now, const LoaderStats& before) {
  LoaderStats d = now;
  d.batches -= before.batches;
  d.images -= before.images;
  d.wait_seconds -= before.wait_seconds;
  for (size_t w = 0; w < d.worker_busy_seconds.size() && w < before.worker_busy_seconds.size(); ++w)
    d.worker_busy_seconds[w] -= before.worker_busy_seconds[w];
  d.cpu_augment_seconds -= before.cpu_augment_seconds;
  d.h2d_bytes -= before.h2d_bytes;
  d.h2d_issue_seconds -= before.h2d_issue_seconds;
  d.h2d_ms -= before.h2d_ms;
  d.h2d_timed -= before.h2d_timed;
  d.augment_ms -= before.augment_ms;
  d.augment_timed -= before.augment_timed;
  d.device_wait_ms -= before.device_wait_ms;
  d.device_wait_timed -= before.device_wait_timed;
  d.worker_slot_wait_seconds -= before.worker_slot_wait_seconds;
  return d;
}

LoaderStats DataLoader::stats() const {
  std::lock_guard<std::mutex> lock(ring_->mutex());
  for (int i = 0; i < ring_->size(); ++i) resolve_timings(ring_->slot_at(i));
  LoaderStats s = stats_;
  for (size_t w = 0; w < s.worker_busy_seconds.size(); ++w) {
    s.worker_busy_seconds[w] = static_cast<double>(worker_busy_ns_[w].load()) * 1e-9;
  }
  s.cpu_augment_seconds = static_cast<double>(cpu_augment_ns_.load()) * 1e-9;
  s.skipped_samples = folder_ ? folder_->skipped_count() : 0;
  return s;
}

void DataLoader::reset_stats() {
  std::lock_guard<std::mutex> lock(ring_->mutex());
  const size_t workers = stats_.worker_busy_seconds.size();
  stats_ = LoaderStats();
  stats_.worker_busy_seconds.assign(workers, 0.0);
  for (size_t w = 0; w < workers; ++w) worker_busy_ns_[w].store(0);
  cpu_augment_ns_.store(0);
  for (int i = 0; i < ring_->size(); ++i) {
    ring_->slot_at(i).copy_timing_pending = false;
    ring_->slot_at(i).aug_timing_pending = false;
  }
}

}  // namespace liftoff
