#include "data/decode/decode_loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "data/decode/decode_loader_internal.h"
#include "runtime/platform/cpu_usage.h"
#include "runtime/random.h"

namespace liftoff {

namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// The epoch's sample order on this rank, as the DataLoader computes it (same permutation, same shards).
std::vector<int64_t> epoch_order(int64_t size, int64_t shard_size, const DecodeLoaderOptions& o,
                                 int64_t epoch) {
  std::vector<int64_t> order;
  if (o.shuffle) {
    Generator gen(shuffle_seed(o.seed, epoch));
    order = randperm(size, gen);
  } else {
    order.resize(static_cast<size_t>(size));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  if (o.world_size <= 1) return order;
  const auto world = static_cast<size_t>(o.world_size);
  const size_t padded = o.even_shards ? static_cast<size_t>(shard_size) * world : order.size();
  std::vector<int64_t> shard;
  for (size_t pos = static_cast<size_t>(o.rank); pos < padded; pos += world)
    shard.push_back(order[pos % order.size()]);
  return shard;
}

}  // namespace

#if !LIFTOFF_WITH_CUDA
// CPU-only build: the device side does not exist (the constructor refuses CUDA targets first).
void DecodeLoader::init_device() {}
void DecodeLoader::decode_loop() {}
void DecodeLoader::decode_on_device(Slot&) {}
void DecodeLoader::issue_decode(Slot&) {}
void DecodeLoader::resolve_timings(Slot&) const {}
void DecodeLoader::hand_out_cuda(Slot&, Batch&) {
  throw DeviceError("DecodeLoader: built without CUDA");
}
#endif

DecodeLoader::DecodeLoader(std::shared_ptr<const ImageFolder> folder, DecodeLoaderOptions options)
    : folder_(std::move(folder)), options_(std::move(options)) {
  const DecodeLoaderOptions& o = options_;
  LIFTOFF_CHECK(folder_ != nullptr && folder_->size() > 0, ValueError, "DecodeLoader: empty image folder");
  LIFTOFF_CHECK(o.batch >= 1, ValueError, "DecodeLoader: batch size ", o.batch,
                " must be at least 1 (--batch)");
  LIFTOFF_CHECK(o.workers >= 1 && o.workers <= 256, ValueError, "DecodeLoader: --workers ", o.workers,
                " must be in [1, 256]");
  LIFTOFF_CHECK(o.prefetch >= 1 && o.prefetch <= 256, ValueError, "DecodeLoader: --prefetch ", o.prefetch,
                " must be in [1, 256]");
  LIFTOFF_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ValueError, "DecodeLoader: rank ",
                o.rank, " is outside [0, world size ", o.world_size, ")");
  LIFTOFF_CHECK(o.channels == 1 || o.channels == 3, ValueError, "DecodeLoader: ", o.channels,
                " output channels; 1 or 3 are supported");
  validate_crop_config(o.crop);
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
#if !LIFTOFF_WITH_CUDA
  LIFTOFF_CHECK(!cuda_target, DeviceError, "DecodeLoader: cannot load to ", o.device.str(),
                ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
#endif
  LIFTOFF_CHECK(o.input_dtype == DType::f32 ||
                    (cuda_target && (o.input_dtype == DType::bf16 || o.input_dtype == DType::f16)),
                DTypeError, "DecodeLoader: input dtype ", dtype_name(o.input_dtype),
                " needs a CUDA device (f32 on the CPU)");
  LIFTOFF_CHECK(o.decode != DecodeMode::gpu || cuda_target, ValueError,
                "DecodeLoader: --decode gpu needs a CUDA device, got ", o.device.str(), "; use --decode cpu");
  mode_ = o.decode == DecodeMode::auto_ ? (cuda_target ? DecodeMode::gpu : DecodeMode::cpu) : o.decode;
  slots_.reserve(static_cast<size_t>(o.prefetch));
  for (int i = 0; i < o.prefetch; ++i) slots_.push_back(std::make_unique<Slot>());
  if (cuda_target) init_device();
  if (mode_ == DecodeMode::cpu) {
    description_.insert(
        0, str_cat("cpu: ", cpu_jpeg_decoder_name(cpu_decoder_),
                   cpu_decoder_ == CpuJpegDecoder::turbo && o.dct_scaling ? " (DCT scaling)" : "", ", ",
                   o.workers, " workers"));
  }
  worker_busy_ns_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(o.workers));
  for (int w = 0; w < o.workers; ++w) worker_busy_ns_[static_cast<size_t>(w)].store(0);
  stats_.worker_busy_seconds.assign(static_cast<size_t>(o.workers), 0.0);
  for (int w = 0; w < o.workers; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
  if (device_) decode_thread_ = std::thread([this] { decode_loop(); });
}

DecodeLoader::~DecodeLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  decode_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  if (decode_thread_.joinable()) decode_thread_.join();
#if LIFTOFF_WITH_CUDA
  // The device may still read the staging buffers: wait for exactly those events (shutdown, not a step).
  for (auto& slot : slots_) {
    try {
      if (slot->decoded) slot->decoded->synchronize();
      if (slot->consumed) slot->consumed->synchronize();
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
  std::vector<int64_t> order = epoch_order(folder_->size(), shard_size_, options_, epoch);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    order_ = std::move(order);
    epoch_ = epoch;
    batches_ = batches_per_epoch();
    step_ = next_claim_ = next_decode_ = 0;
    // Finished or queued batches of an older epoch are dropped; busy ones are dropped by their thread.
    for (auto& slot : slots_) {
      if (slot->state == Slot::State::ready || slot->state == Slot::State::filled) release_slot_locked(*slot);
    }
  }
  work_cv_.notify_all();
  decode_cv_.notify_all();
}

void DecodeLoader::release_slot_locked(Slot& slot) {
  slot.state = Slot::State::free;
  slot.batch = -1;
  slot.error = nullptr;
}

bool DecodeLoader::is_bad(int64_t index) const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return bad_.count(index) != 0;
}

bool DecodeLoader::skip_bad(int64_t index, const std::string& path) {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  if (bad_.insert(index).second) bad_files_.push_back(path);
  return false;
}

std::vector<std::string> DecodeLoader::skipped_files() const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return bad_files_;
}

void DecodeLoader::worker_loop(int worker) {
  const platform::ThreadRegistration registration("decode-" + std::to_string(worker));
  const auto k = static_cast<int64_t>(slots_.size());
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [&] {
      return stop_ || (next_claim_ < batches_ &&
                       slots_[static_cast<size_t>(next_claim_ % k)]->state == Slot::State::free);
    });
    if (stop_) return;
    const int64_t b = next_claim_++;
    Slot& slot = *slots_[static_cast<size_t>(b % k)];
    slot.state = Slot::State::filling;
    slot.batch = b;
    slot.generation = generation_;
    slot.epoch = epoch_;
    slot.error = nullptr;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const int64_t begin = b * options_.batch, end = std::min<int64_t>(begin + options_.batch, shard_size_);
    const std::vector<int64_t> indices(order_.begin() + begin, order_.begin() + end);
    lock.unlock();
    std::exception_ptr error;
    try {
      const auto start = Clock::now();
      fill(slot, indices, epoch);
      worker_busy_ns_[static_cast<size_t>(worker)].fetch_add(ns_since(start));
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_ || stop_) {
      release_slot_locked(slot);
      work_cv_.notify_all();
      continue;
    }
    slot.error = error;
    // A CUDA target's batch goes through the decode thread, in order (also an erroneous one, to keep order).
    slot.state = device_ ? Slot::State::filled : Slot::State::ready;
    decode_cv_.notify_all();
    ready_cv_.notify_all();
  }
}

bool DecodeLoader::read_item(int64_t index, int64_t epoch, Item& item, std::vector<uint8_t>& data) {
  const std::string& path = folder_->path(index);
  const DecodeLoaderOptions& o = options_;
  try {
    EncodedImage image = read_encoded_image(path, o.limits);
    const auto h = static_cast<int32_t>(image.info.height), w = static_cast<int32_t>(image.info.width);
    item.index = index;
    item.label = folder_->label(index);
    if (mode_ == DecodeMode::gpu && image.route != GpuRoute::cpu) {
      item.gpu = true;
      item.hardware = image.route == GpuRoute::hardware;
      item.desc = make_crop_desc(o.train, o.seed, epoch, index, h, w, h, w, o.crop);
      data = std::move(image.bytes);
      return true;
    }
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
    return true;
  } catch (const IOError&) {
    if (o.on_bad_sample == BadSamplePolicy::error) throw;
    return skip_bad(index, path);
  }
}

void DecodeLoader::fill(Slot& slot, const std::vector<int64_t>& indices, int64_t epoch) {
#if LIFTOFF_WITH_CUDA
  // The staging buffers are refilled only once the device has finished reading them.
  if (slot.device_busy) {
    slot.decoded->synchronize();
    slot.device_busy = false;
  }
#endif
  slot.items.clear();
  std::vector<std::vector<uint8_t>> blobs;
  int64_t cpu_decoded = 0;
  for (const int64_t index : indices) {
    if (is_bad(index)) continue;
    Item item;
    std::vector<uint8_t> data;
    if (!read_item(index, epoch, item, data)) continue;
    item.size = data.size();
    cpu_decoded += item.gpu ? 0 : 1;
    slot.items.push_back(item);
    blobs.push_back(std::move(data));
  }
  // Layout: file bytes (nvJPEG's input) and host-decoded pixels, each packed in batch order.
  slot.file_bytes = slot.pixel_bytes = 0;
  for (Item& item : slot.items) {
    size_t& used = item.gpu ? slot.file_bytes : slot.pixel_bytes;
    item.at = used;
    item.desc.offset = static_cast<int64_t>(used);
    used += item.size;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counts_.cpu += cpu_decoded;
  }
  if (!device_) return finish_cpu_batch(slot, blobs);
#if LIFTOFF_WITH_CUDA
  uint8_t* bytes = slot.bytes.ensure(std::max<size_t>(slot.file_bytes, 1));
  uint8_t* pixels = slot.pixels.ensure(std::max<size_t>(slot.pixel_bytes, 1));
  for (size_t i = 0; i < slot.items.size(); ++i) {
    const Item& item = slot.items[i];
    std::memcpy((item.gpu ? bytes : pixels) + item.at, blobs[i].data(), item.size);
  }
#endif
}

void DecodeLoader::finish_cpu_batch(Slot& slot, const std::vector<std::vector<uint8_t>>& blobs) {
  slot.input = Tensor();
  slot.labels = Tensor();
  if (slot.items.empty()) return;
  std::vector<uint8_t> arena(slot.pixel_bytes);
  std::vector<CropDesc> descs;
  std::vector<int64_t> labels;
  for (size_t i = 0; i < slot.items.size(); ++i) {
    const Item& item = slot.items[i];
    std::memcpy(arena.data() + item.at, blobs[i].data(), item.size);
    descs.push_back(item.desc);
    labels.push_back(item.label);
  }
  slot.input = resized_crop_batch(arena.data(), descs, options_.crop.out_height, options_.crop.out_width,
                                  options_.channels, mean_, stddev_);
  slot.labels = Tensor::from_vector(labels, {static_cast<int64_t>(labels.size())});
}

bool DecodeLoader::next(Batch& out) {
  LIFTOFF_CHECK(epoch_ >= 0, ValueError, "DecodeLoader: call start_epoch() before next()");
  const auto k = static_cast<int64_t>(slots_.size());
  while (true) {
    if (step_ >= batches_) return false;
    Slot& slot = *slots_[static_cast<size_t>(step_ % k)];
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto start = Clock::now();
      ready_cv_.wait(lock, [&] {
        return slot.state == Slot::State::ready && slot.batch == step_ && slot.generation == generation_;
      });
      stats_.wait_seconds += static_cast<double>(ns_since(start)) * 1e-9;
      // The batch stays in its slot, so calling next() again rethrows the same error.
      if (slot.error) std::rethrow_exception(slot.error);
    }
    const auto count = static_cast<int64_t>(slot.items.size());
    if (count > 0) {
      if (device_) {
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
      out.step_in_epoch = step_;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (count > 0) {
      ++stats_.batches;
      stats_.images += count;
    }
    release_slot_locked(slot);
    ++step_;
    work_cv_.notify_all();
    if (count > 0) return true;
  }
}

LoaderStats DecodeLoader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& slot : slots_) resolve_timings(*slot);
  LoaderStats s = stats_;
  for (size_t w = 0; w < s.worker_busy_seconds.size(); ++w) {
    s.worker_busy_seconds[w] = static_cast<double>(worker_busy_ns_[w].load()) * 1e-9;
  }
  std::lock_guard<std::mutex> bad_lock(bad_mutex_);
  s.skipped_samples = static_cast<int64_t>(bad_.size());
  return s;
}

DecodeCounts DecodeLoader::decode_counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& slot : slots_) resolve_timings(*slot);
  DecodeCounts c = counts_;
  std::lock_guard<std::mutex> bad_lock(bad_mutex_);
  c.skipped = static_cast<int64_t>(bad_.size());
  return c;
}

}  // namespace liftoff
