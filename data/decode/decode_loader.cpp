#include "data/decode/decode_loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "data/decode/decode_loader_internal.h"
#include "runtime/platform/cpu_usage.h"
#include "runtime/platform/thread_name.h"
#include "runtime/stream.h"

namespace liftoff {

namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::shared_ptr<void> allocate_pageable(size_t bytes) {
  return std::shared_ptr<void>(new uint8_t[bytes], std::default_delete<uint8_t[]>());
}

}  // namespace

namespace decode_detail {

void StagingPool::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Chunk& chunk : chunks_) chunk.used = chunk.start = 0;
  current_ = total_ = 0;
}

StagingPool::Region StagingPool::reserve(size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The current chunk, else the next kept one with room (skipped ones stay out of this batch's layout),
  // else a new one at the end.
  while (current_ < chunks_.size() && chunks_[current_].capacity - chunks_[current_].used < n) ++current_;
  if (current_ == chunks_.size()) {
    Chunk chunk;
    chunk.capacity = std::max(n, kChunkBytes);
    chunk.block = allocate_(chunk.capacity);
    chunks_.push_back(std::move(chunk));
  }
  Chunk& chunk = chunks_[current_];
  if (chunk.used == 0) chunk.start = total_;
  Region region{chunk.data() + chunk.used, chunk.start + chunk.used};
  chunk.used += n;
  total_ = chunk.start + chunk.used;
  return region;
}

size_t StagingPool::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

std::vector<const StagingPool::Chunk*> StagingPool::used_chunks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Chunk*> used;
  for (const Chunk& chunk : chunks_) {
    if (chunk.used > 0) used.push_back(&chunk);
  }
  return used;
}

}  // namespace decode_detail

#if !LIFTOFF_WITH_CUDA
// CPU-only build: the device side does not exist (the constructor refuses CUDA targets first).
void DecodeLoader::init_device() {}
void DecodeLoader::lane_loop(int) {}
void DecodeLoader::decode_on_device(Slot&, Lane&) {}
void DecodeLoader::issue_decode(Slot&, Lane&) {}
void DecodeLoader::resolve_timings(Slot&) const {}
void DecodeLoader::hand_out_cuda(Slot&, Batch&) {
  throw DeviceError("DecodeLoader: built without CUDA");
}
#endif

void DecodeLoader::validate_options() const {
  const DecodeLoaderOptions& o = options_;
  LIFTOFF_CHECK(folder_ != nullptr && folder_->size() > 0, ValueError, "DecodeLoader: empty image folder");
  LIFTOFF_CHECK(o.batch >= 1, ValueError, "DecodeLoader: batch size ", o.batch,
                " must be at least 1 (--batch)");
  LIFTOFF_CHECK(o.workers >= 1 && o.workers <= 256, ValueError, "DecodeLoader: --workers ", o.workers,
                " must be in [1, 256]");
  LIFTOFF_CHECK(o.prefetch >= 1 && o.prefetch <= 256, ValueError, "DecodeLoader: --prefetch ", o.prefetch,
                " must be in [1, 256]");
  LIFTOFF_CHECK(o.decode_lanes >= 1 && o.decode_lanes <= 16, ValueError, "DecodeLoader: --decode-lanes ",
                o.decode_lanes, " must be in [1, 16]");
  LIFTOFF_CHECK(o.hardware_batch >= -1, ValueError, "DecodeLoader: hardware batch ", o.hardware_batch,
                " must be -1 (the decoder's engines x cores), 0 (whole batches) or positive");
  LIFTOFF_CHECK(o.hardware_share >= 0.0 && o.hardware_share <= 1.0, ValueError,
                "DecodeLoader: hardware share ", o.hardware_share, " must be in [0, 1]");
  LIFTOFF_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ValueError, "DecodeLoader: rank ",
                o.rank, " is outside [0, world size ", o.world_size, ")");
  LIFTOFF_CHECK(o.channels == 1 || o.channels == 3, ValueError, "DecodeLoader: ", o.channels,
                " output channels; 1 or 3 are supported");
  validate_crop_config(o.crop);
  const bool cuda_target = o.device.is_cuda();
#if !LIFTOFF_WITH_CUDA
  LIFTOFF_CHECK(!cuda_target, DeviceError, "DecodeLoader: cannot load to ", o.device.str(),
                ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
#endif
  LIFTOFF_CHECK(o.input_dtype == DType::f32 ||
                    (cuda_target && (o.input_dtype == DType::bf16 || o.input_dtype == DType::f16)),
                DTypeError, "DecodeLoader: input dtype ", dtype_name(o.input_dtype),
                " needs a CUDA device (f32 on the CPU)");
  LIFTOFF_CHECK((o.decode != DecodeMode::gpu && o.decode != DecodeMode::hybrid) || cuda_target, ValueError,
                "DecodeLoader: --decode ", decode_mode_name(o.decode), " needs a CUDA device, got ",
                o.device.str(), "; use --decode cpu");
  LIFTOFF_CHECK(std::isfinite(o.cpu_share) && o.cpu_share <= 1.0, ValueError, "DecodeLoader: CPU share ",
                o.cpu_share, " must be in [0, 1] (fixed) or negative (adaptive)");
}

// auto: the hybrid on a CUDA device (init_device falls back to the CPU without nvJPEG). With
// `deterministic` one fixed route: the CPU (the same pixels on every machine), or nvJPEG when there are not
// two workers to decode (mode_note_ says so in the description).
void DecodeLoader::resolve_mode() {
  const DecodeLoaderOptions& o = options_;
  if (o.decode != DecodeMode::auto_) {
    mode_ = o.decode;
  } else if (!o.device.is_cuda()) {
    mode_ = DecodeMode::cpu;
  } else if (!o.deterministic) {
    mode_ = DecodeMode::hybrid;
  } else {
    mode_ = o.workers >= 2 ? DecodeMode::cpu : DecodeMode::gpu;
    mode_note_ = mode_ == DecodeMode::cpu
                     ? " (auto, deterministic: one fixed route, the CPU)"
                     : " (auto, deterministic: one fixed route, nvJPEG: fewer than 2 workers)";
  }
}

std::string DecodeLoader::cpu_description() const {
  return str_cat(cpu_jpeg_decoder_name(cpu_decoder_),
                 cpu_decoder_ == CpuJpegDecoder::turbo && options_.dct_scaling ? " (DCT scaling)" : "", ", ",
                 options_.workers, " workers");
}

DecodeLoader::DecodeLoader(std::shared_ptr<const ImageFolder> folder, DecodeLoaderOptions options)
    : folder_(std::move(folder)), options_(std::move(options)) {
  prefetch_ = NextEpochPrefetch(options_.shuffle, options_.epochs);
  stall_watch_ = stall_watch_from_settings([this] { return stall_details_locked(); });
  validate_options();
  const DecodeLoaderOptions& o = options_;
  const int64_t size = folder_->size(), world = o.world_size;
  shard_size_ = o.even_shards ? (size + world - 1) / world : (size - o.rank + world - 1) / world;
  LIFTOFF_CHECK(!o.drop_last || o.batch <= shard_size_, ValueError, "DecodeLoader: batch size ", o.batch,
                " with drop_last leaves no batch from ", shard_size_,
                " samples; use a smaller --batch (or --no-drop-last)");
  mean_ = o.mean;
  stddev_ = o.stddev;
  if (mean_.empty() && stddev_.empty()) {
    mean_ = o.channels == 3 ? std::vector<float>{0.485f, 0.456f, 0.406f} : std::vector<float>{0.5f};
    stddev_ = o.channels == 3 ? std::vector<float>{0.229f, 0.224f, 0.225f} : std::vector<float>{0.25f};
  }
  LIFTOFF_CHECK(
      static_cast<int64_t>(mean_.size()) == o.channels && static_cast<int64_t>(stddev_.size()) == o.channels,
      ValueError, "DecodeLoader: ", o.channels, " channels but ", mean_.size(), " mean and ", stddev_.size(),
      " std values");
  for (size_t c = 0; c < stddev_.size(); ++c) {
    LIFTOFF_CHECK(std::isfinite(mean_[c]) && std::isfinite(stddev_[c]) && stddev_[c] > 0.0f, ValueError,
                  "DecodeLoader: channel ", c, " has mean ", mean_[c], " and std ", stddev_[c],
                  "; std must be finite and > 0");
  }
  cpu_decoder_ = resolve_cpu_jpeg_decoder(o.cpu_decoder);
  const bool cuda_target = o.device.is_cuda();
  resolve_mode();
  // A slot always goes to the same lane (batch b: slot b % slots, lane b % lanes), so its device blocks stay
  // on that lane's stream.
  const int lanes = cuda_target ? o.decode_lanes : 1;
  ring_ = std::make_unique<Ring>((o.prefetch + lanes - 1) / lanes * lanes);
  for (int i = 0; i < ring_->size(); ++i) {
    Slot& slot = ring_->slot_at(i);
    const auto allocate = cuda_target ? &allocate_pinned_host : &allocate_pageable;
    slot.bytes.set_allocator(allocate);
    slot.pixels.set_allocator(allocate);
  }
  if (cuda_target) init_device();  // the GPU's description, or the CPU fallback's reason
  if (mode_ == DecodeMode::cpu) {
    description_.insert(0, "cpu: " + cpu_description());
  } else if (mode_ == DecodeMode::gpu) {
    description_.insert(0, "gpu: ");
  } else {
    HybridShareConfig config;
    config.workers = o.workers;
    hybrid_ = std::make_unique<HybridShareController>(config);
    description_ = str_cat(
        "auto: hybrid CPU (", cpu_description(), ") + GPU (", description_, "); CPU share ",
        o.cpu_share >= 0 ? str_cat(o.cpu_share, " (fixed)") : str_cat("adaptive from ", hybrid_->share()));
  }
  description_ += mode_note_;
  worker_busy_ns_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(o.workers));
  for (int w = 0; w < o.workers; ++w) worker_busy_ns_[static_cast<size_t>(w)].store(0);
  stats_.worker_busy_seconds.assign(static_cast<size_t>(o.workers), 0.0);
  for (int w = 0; w < o.workers; ++w) {
    threads_.emplace_back([this, w] {
      platform::set_current_thread_name("lo-decode-" + std::to_string(w));
      worker_loop(w);
    });
  }
  for (size_t l = 0; l < lanes_.size(); ++l) {
    lane_threads_.emplace_back([this, l] {
      platform::set_current_thread_name("lo-dlane-" + std::to_string(l));
      lane_loop(static_cast<int>(l));
    });
  }
}

DecodeLoader::~DecodeLoader() {
  ring_->stop();
  for (std::thread& t : threads_) t.join();
  for (std::thread& t : lane_threads_) t.join();
#if LIFTOFF_WITH_CUDA
  // The device may still read the staging buffers: wait for exactly those events (shutdown, not a step).
  for (int i = 0; i < ring_->size(); ++i) {
    Slot& slot = ring_->slot_at(i);
    try {
      if (slot.decoded) slot.decoded->synchronize();
      if (slot.consumed) slot.consumed->synchronize();
    } catch (const std::exception&) {
      // A failed device cannot be waited for; nothing better to do in a destructor.
    }
  }
#endif
}

int64_t DecodeLoader::batches_per_epoch() const {
  return options_.drop_last ? shard_size_ / options_.batch
                            : (shard_size_ + options_.batch - 1) / options_.batch;
}

void DecodeLoader::start_epoch(int64_t epoch) {
  LIFTOFF_CHECK(epoch >= 0, ValueError, "DecodeLoader: epoch ", epoch, " is negative");
  if (prefetch_.take(epoch)) return;
  begin_epoch(epoch);
}

void DecodeLoader::begin_epoch(int64_t epoch) {
  const DecodeLoaderOptions& o = options_;
  std::vector<int64_t> order = epoch_sample_order(folder_->size(), shard_size_, o.shuffle, o.seed, epoch,
                                                  o.rank, o.world_size, o.even_shards);
  ring_->start_epoch(epoch, batches_per_epoch(), [&] {
    order_ = std::move(order);
    epoch_ = epoch;
    for (auto& lane : lanes_) lane->next_batch = lane->number;
    last_handout_ns_ = -1;
  });
}

// The folder keeps the one list of bad files (with the reasons), whoever found them: its load-time check, a
// worker, the decode thread.
bool DecodeLoader::is_bad(int64_t index) const {
  // Under the error policy every file is read: a bad one must stop this loader, whoever recorded it.
  return options_.on_bad_sample == BadSamplePolicy::skip && folder_->is_bad(index);
}

bool DecodeLoader::skip_bad(int64_t index, const std::string& reason) {
  folder_->record_bad(index, reason);
  return false;
}

std::vector<std::string> DecodeLoader::skipped_files() const {
  return folder_->skipped_files();
}

// Under the ring's lock: a position of the oldest open batch of this generation, else a newly claimed batch
// to open (*position = -1), else null. Positions of a batch whose generation is over are given up at once.
DecodeLoader::Slot* DecodeLoader::next_work_locked(int64_t* position) {
  Ring& ring = *ring_;
  Slot* oldest = nullptr;
  for (int i = 0; i < ring.size(); ++i) {
    Slot& slot = ring.slot_at(i);
    if (slot.state != RingSlot::State::filling || !slot.open) continue;
    const auto n = static_cast<int64_t>(slot.indices.size());
    if (slot.generation != ring.generation() || ring.stopped()) {
      slot.next_position = n;  // its remaining positions are given up; dropped once no worker holds one
      if (slot.busy == 0) ring.hand_on(slot, RingSlot::State::ready, nullptr);
      continue;
    }
    if (slot.next_position < n && (oldest == nullptr || slot.batch < oldest->batch)) oldest = &slot;
  }
  if (oldest != nullptr) {
    *position = oldest->next_position++;
    ++oldest->busy;
    return oldest;
  }
  if (!ring.claimable()) return nullptr;
  Slot& slot = ring.claim();
  const int64_t begin = slot.batch * options_.batch;
  const int64_t end = std::min<int64_t>(begin + options_.batch, shard_size_);
  slot.indices.assign(order_.begin() + begin, order_.begin() + end);
  slot.next_position = slot.done = slot.busy = 0;
  slot.open = false;
  if (mode_ == DecodeMode::hybrid) begin_hybrid_batch(slot);
  *position = -1;
  return &slot;
}

bool DecodeLoader::stale(const Slot& slot) const {
  return slot.generation != ring_->generation() || ring_->stopped();
}

void DecodeLoader::worker_loop(int worker) {
  const platform::ThreadRegistration registration("decode-" + std::to_string(worker));
  Ring& ring = *ring_;
  std::unique_lock<std::mutex> lock(ring.mutex());
  while (true) {
    Slot* slot = nullptr;
    int64_t position = 0;
    ring.work_cv.wait(lock,
                      [&] { return ring.stopped() || (slot = next_work_locked(&position)) != nullptr; });
    if (ring.stopped()) return;
    lock.unlock();
    const auto start = Clock::now();
    int64_t device_wait_ns = 0;  // not busy: the device still reading the slot (back-pressure)
    if (position < 0) {
      device_wait_ns = open_batch(*slot);
      lock.lock();
      slot->open = true;  // the other workers may now fill its positions
      ring.work_cv.notify_all();
    } else {
      fill_item(*slot, position);
      lock.lock();
      const bool last = ++slot->done == static_cast<int64_t>(slot->indices.size());
      if (last && !stale(*slot)) {
        lock.unlock();
        finish_batch(*slot);
        lock.lock();
      }
      --slot->busy;
      // The batch moves on (a CUDA target's through its decode lane, in order, also an erroneous one), or,
      // of an old generation, is dropped once no worker holds a position (hand_on drops it).
      const auto n = static_cast<int64_t>(slot->indices.size());
      if (last || (stale(*slot) && slot->busy == 0 && slot->next_position == n)) {
        ring.hand_on(*slot, lanes_.empty() ? RingSlot::State::ready : RingSlot::State::filled, slot->error);
      }
    }
    worker_busy_ns_[static_cast<size_t>(worker)].fetch_add(ns_since(start) - device_wait_ns);
    if (device_wait_ns > 0) worker_slot_wait_ns_.fetch_add(device_wait_ns);
  }
}

int64_t DecodeLoader::open_batch(Slot& slot) {
  int64_t waited_ns = 0;
#if LIFTOFF_WITH_CUDA
  // The staging is rewritten only once the device has finished reading it (a wait on this slot's event only,
  // on a worker, never on the training thread).
  if (slot.device_busy) {
    const auto start = Clock::now();
    slot.decoded->synchronize();
    slot.device_busy = false;
    waited_ns = ns_since(start);
  }
#endif
  slot.bytes.reset();
  slot.pixels.reset();
  slot.items.assign(slot.indices.size(), Item());
  slot.sample = HybridBatchSample();
  slot.routes = DecodeCounts();
  if (mode_ == DecodeMode::hybrid)
    // The share is of the files nvJPEG could decode (the controller's model), not of the whole batch.
    slot.route_budget.reset(std::llround(static_cast<double>(slot.indices.size()) * slot.routable_fraction),
                            slot.cpu_share, slot.expensive_fraction);
  slot.error = nullptr;
  // Since when the workers could have begun it: when the consumer released the slot, or when the device did
  // (not when a worker got round to it: a saturated pool claims a batch only once the one before is handed
  // out to its positions, which would make every batch look freshly opened).
  slot.opened_ns = waited_ns > 0 ? now_ns() : slot.released_ns;
  return waited_ns;
}

void DecodeLoader::fill_item(Slot& slot, int64_t position) {
  Item& item = slot.items[static_cast<size_t>(position)];
  item.index = slot.indices[static_cast<size_t>(position)];
  if (is_bad(item.index)) return;
  const auto start = Clock::now();
  try {
    item.kept =
        read_item(item.index, slot.epoch, item, mode_ == DecodeMode::hybrid ? &slot.route_budget : nullptr);
  } catch (...) {
    item.error = std::current_exception();
  }
  if (!item.kept || item.error) return;
  // Staged where the lane copies from (pinned on a CUDA target): file bytes for nvJPEG, pixels otherwise.
  decode_detail::StagingPool& pool = item.gpu ? slot.bytes : slot.pixels;
  const decode_detail::StagingPool::Region region = pool.reserve(std::max<size_t>(item.size, 1));
  std::memcpy(region.data, item.data, item.size);
  item.data = region.data;
  item.at = region.at;
  item.read_ns = ns_since(start);
}

bool DecodeLoader::read_item(int64_t index, int64_t epoch, Item& item, HybridRouteBudget* budget) {
  const std::string& path = folder_->path(index);
  const DecodeLoaderOptions& o = options_;
  // The bytes live here until fill_item staged them.
  thread_local std::vector<uint8_t> data;
  try {
    EncodedImage image = read_encoded_image(path, o.limits);
    const auto h = static_cast<int32_t>(image.info.height), w = static_cast<int32_t>(image.info.width);
    item.label = folder_->label(index);
    item.route = image.route;
    const bool nvjpeg_takes = mode_ != DecodeMode::cpu && image.route != GpuRoute::cpu;
    item.by_share = nvjpeg_takes && budget != nullptr && budget->take_cpu(image.route);
    if (nvjpeg_takes && !item.by_share) {
      item.gpu = true;
      item.hardware = image.route == GpuRoute::hardware;
      item.desc = make_crop_desc(o.train, o.seed, epoch, index, h, w, h, w, o.crop);
      data = std::move(image.bytes);
    } else {
      int eighths = 8;
      if (o.dct_scaling && image.jpeg.is_jpeg && cpu_decoder_ == CpuJpegDecoder::turbo) {
        double region_h = h, region_w = w;
        crop_source_extent(o.train, o.seed, epoch, index, h, w, o.crop, &region_h, &region_w);
        eighths = jpeg_scale_eighths(region_h, region_w, o.crop.out_height, o.crop.out_width);
      }
      DecodedImage decoded = decode_encoded_image(path, image, cpu_decoder_, eighths);
      item.desc = make_crop_desc(o.train, o.seed, epoch, index, h, w, static_cast<int32_t>(decoded.height),
                                 static_cast<int32_t>(decoded.width), o.crop);
      data = std::move(decoded.pixels);
    }
    item.data = data.data();
    item.size = data.size();
    return true;
  } catch (const IOError& e) {
    if (o.on_bad_sample == BadSamplePolicy::error) throw;
    return skip_bad(index, e.what());
  }
}

// The last worker of a batch: the first failed position's error, the kept items in batch order, and on a
// CPU target the finished tensors.
void DecodeLoader::finish_batch(Slot& slot) {
  std::vector<Item> kept;
  HybridBatchSample& sample = slot.sample;
  int64_t routable = 0, expensive = 0, by_share = 0;
  for (Item& item : slot.items) {
    if (item.error && !slot.error) slot.error = item.error;
    if (!item.kept) continue;
    item.desc.offset = static_cast<int64_t>(item.at);  // host pixels: their place in the layout
    (item.gpu ? sample.gpu_images : sample.cpu_images) += 1;
    (item.gpu ? sample.gpu_seconds : sample.cpu_seconds) += static_cast<double>(item.read_ns) * 1e-9;
    sample.forced_cpu += item.route == GpuRoute::cpu ? 1 : 0;
    routable += item.route != GpuRoute::cpu ? 1 : 0;
    expensive += item.route == GpuRoute::nvjpeg ? 1 : 0;
    by_share += item.by_share ? 1 : 0;
    kept.push_back(item);
  }
  slot.items = std::move(kept);
  {
    std::lock_guard<std::mutex> lock(ring_->mutex());
    slot.routes.cpu += sample.cpu_images;
    slot.filled_ns = now_ns();
    if (mode_ == DecodeMode::hybrid) {
      slot.routes.hybrid_routable += routable;
      slot.routes.hybrid_cpu += by_share;
      routable_seen_ += routable;
      expensive_seen_ += expensive;
      files_seen_ += static_cast<int64_t>(slot.items.size());
    }
  }
  if (lanes_.empty() && !slot.error) {
    try {
      finish_cpu_batch(slot);
    } catch (...) {
      slot.error = std::current_exception();
    }
  }
}

void DecodeLoader::finish_cpu_batch(Slot& slot) {
  slot.input = Tensor();
  slot.labels = Tensor();
  if (slot.items.empty()) return;
  std::vector<uint8_t> arena(slot.pixels.total());
  for (const auto* chunk : slot.pixels.used_chunks())
    std::memcpy(arena.data() + chunk->start, chunk->data(), chunk->used);
  std::vector<CropDesc> descs;
  std::vector<int64_t> labels;
  for (const Item& item : slot.items) {
    descs.push_back(item.desc);
    labels.push_back(item.label);
  }
  slot.input = resized_crop_batch(arena.data(), descs, options_.crop.out_height, options_.crop.out_width,
                                  options_.channels, mean_, stddev_);
  slot.labels = Tensor::from_vector(labels, {static_cast<int64_t>(labels.size())});
}

bool DecodeLoader::next(Batch& out) {
  LIFTOFF_CHECK(epoch_ >= 0, ValueError, "DecodeLoader: call start_epoch() before next()");
  while (true) {
    const int64_t asked_ns = mode_ == DecodeMode::hybrid ? now_ns() : 0;
    if (prefetch_.over()) return false;
    Slot* ready = ring_->wait_ready(&stats_.wait_seconds,
                                    stall_watch_);  // adds under the ring's lock, as stats() reads it
    if (ready == nullptr) {
      prefetch_.after_epoch(epoch_, order_, [&] { begin_epoch(epoch_ + 1); });
      return false;
    }
    Slot& slot = *ready;
    const auto count = static_cast<int64_t>(slot.items.size());
    if (count > 0) {
      if (!lanes_.empty()) {
        hand_out_cuda(slot, out);
      } else {
        out.images_u8 = Tensor();
        out.input = std::move(slot.input);
        out.labels = std::move(slot.labels);
        slot.input = slot.labels = Tensor();
      }
      out.indices.clear();
      for (const Item& item : slot.items) out.indices.push_back(item.index);
      out.epoch = slot.epoch;
      out.step_in_epoch = slot.batch;
    }
    {
      std::lock_guard<std::mutex> lock(ring_->mutex());
      counts_.add_routes(slot.routes);  // also a batch whose files were all skipped
      if (count > 0) {
        ++stats_.batches;
        stats_.images += count;
        if (mode_ == DecodeMode::hybrid) feed_hybrid(slot, asked_ns);
      }
      slot.released_ns = now_ns();
    }
    ring_->consume(slot);
    if (count > 0) return true;
  }
}

void DecodeLoader::begin_hybrid_batch(Slot& slot) {
  slot.cpu_share = options_.cpu_share >= 0 ? options_.cpu_share : hybrid_->share();
  slot.expensive_fraction =
      routable_seen_ > 0 ? static_cast<double>(expensive_seen_) / static_cast<double>(routable_seen_) : 0.0;
  slot.routable_fraction =
      files_seen_ > 0 ? static_cast<double>(routable_seen_) / static_cast<double>(files_seen_) : 1.0;
}

// The batch's measurements to the controller. A wait counts against the workers only where it was theirs
// (waited_for_workers: not an epoch's start-up, not a slot the device still held).
void DecodeLoader::feed_hybrid(Slot& slot, int64_t asked_ns) {
  HybridBatchSample sample = slot.sample;
  const int64_t now = now_ns();
  sample.interval_seconds = last_handout_ns_ >= 0 ? static_cast<double>(now - last_handout_ns_) * 1e-9 : 0.0;
  HybridWaitTimes times;
  times.batch = slot.batch;
  times.ring_size = ring_->size();
  times.asked_ns = asked_ns;
  times.opened_ns = slot.opened_ns;
  times.filled_ns = slot.filled_ns;
  times.previous_handout_ns = last_handout_ns_;
  if (hybrid_->seconds_per_image() > 0)
    times.steady_interval_ns =
        std::llround(hybrid_->seconds_per_image() * 1e9 * static_cast<double>(slot.items.size()));
  sample.waited_for_workers = waited_for_workers(times);
  int64_t busy_ns = 0;
  for (int w = 0; w < options_.workers; ++w) busy_ns += worker_busy_ns_[static_cast<size_t>(w)].load();
  if (last_handout_ns_ >= 0)
    sample.worker_busy_seconds = static_cast<double>(busy_ns - busy_at_handout_ns_) * 1e-9;
  busy_at_handout_ns_ = busy_ns;
  last_handout_ns_ = now;
  if (options_.cpu_share < 0) hybrid_->update(sample);
}

// Under the ring's lock (a stall report): each busy slot's workers' cursor and device state, each lane's next
// batch, the hybrid's share.
std::string DecodeLoader::stall_details_locked() const {
  std::string text = "workers:";
  for (int i = 0; i < ring_->size(); ++i) {
    const Slot& slot = ring_->slot_at(i);
    if (slot.state == RingSlot::State::free) continue;
    text += " [" + std::to_string(i) + "] " + (slot.open ? "open" : "opening") + " positions " +
            std::to_string(slot.next_position) + "/" + std::to_string(slot.indices.size()) + " done " +
            std::to_string(slot.done) + " busy " + std::to_string(slot.busy);
#if LIFTOFF_WITH_CUDA
    if (slot.device_busy) text += " device-busy";
#endif
  }
  if (!lanes_.empty()) {
    text += "; decode lanes' next batch:";
    for (const auto& lane : lanes_) text += " " + std::to_string(lane->next_batch);
  }
  if (mode_ == DecodeMode::hybrid) text += "; hybrid CPU share " + std::to_string(hybrid_share_locked());
  return text;
}

double DecodeLoader::hybrid_share_locked() const {
  if (mode_ != DecodeMode::hybrid) return -1.0;
  return options_.cpu_share >= 0 ? options_.cpu_share : hybrid_->share();
}

LoaderStats DecodeLoader::stats() const {
  std::lock_guard<std::mutex> lock(ring_->mutex());
  for (int i = 0; i < ring_->size(); ++i) resolve_timings(ring_->slot_at(i));
  LoaderStats s = stats_;
  for (size_t w = 0; w < s.worker_busy_seconds.size(); ++w) {
    s.worker_busy_seconds[w] = static_cast<double>(worker_busy_ns_[w].load()) * 1e-9;
  }
  s.worker_slot_wait_seconds = static_cast<double>(worker_slot_wait_ns_.load()) * 1e-9;
  s.ring_slots = ring_->size();
  s.skipped_samples = folder_->skipped_count();
  s.hybrid_cpu_share_final = hybrid_share_locked();
  s.hybrid_cpu_share_mean = mode_ == DecodeMode::hybrid ? std::max(0.0, counts_.hybrid_mean_share()) : -1.0;
  return s;
}

DecodeCounts DecodeLoader::decode_counts() const {
  std::lock_guard<std::mutex> lock(ring_->mutex());
  for (int i = 0; i < ring_->size(); ++i) resolve_timings(ring_->slot_at(i));
  DecodeCounts c = counts_;
  c.skipped = folder_->skipped_count();
  c.hybrid_share = hybrid_share_locked();
  return c;
}

}  // namespace liftoff
