// The CUDA side of DecodeLoader: the decode stream and thread (copies, nvJPEG), the crop kernel's launch in
// next(), and the device timings.
#include <algorithm>
#include <cstring>

#include "data/decode/crop_cuda.h"
#include "data/decode/decode_loader_internal.h"
#include "data/decode/decode_stream.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/platform/cpu_usage.h"
#include "runtime/stream.h"

namespace liftoff {

namespace {

// The decode streams of a device (one per lane), made once and kept: cached device blocks stay keyed to them.
cudaStream_t lane_stream(int device, int lane) {
  static std::mutex mutex;
  static std::vector<std::vector<cudaStream_t>> streams;
  std::lock_guard<std::mutex> lock(mutex);
  if (streams.size() <= static_cast<size_t>(device)) streams.resize(static_cast<size_t>(device) + 1);
  std::vector<cudaStream_t>& of_device = streams[static_cast<size_t>(device)];
  if (of_device.size() <= static_cast<size_t>(lane)) of_device.resize(static_cast<size_t>(lane) + 1, nullptr);
  cudaStream_t& s = of_device[static_cast<size_t>(lane)];
  if (s == nullptr) s = cuda::create_decode_stream(device);
  return s;
}

// Device memory ordered on `stream` that grows (the old block goes back to that stream's cache).
uint8_t* ensure_device(std::shared_ptr<void>& block, size_t& capacity, size_t n, int device,
                       cudaStream_t stream) {
  if (n > capacity || block == nullptr) {
    block.reset();
    capacity = std::max({n, capacity + capacity / 2, size_t{256}});
    block = cuda::CachingAllocator::get().allocate_shared(capacity, device, stream);
  }
  return static_cast<uint8_t*>(block.get());
}

}  // namespace

void DecodeLoader::init_device() {
  const DecodeLoaderOptions& o = options_;
  const int device = o.device.index;
  cuda::DeviceGuard guard(device);
  std::vector<std::unique_ptr<cuda::NvjpegDecoder>> decoders;
  if (mode_ != DecodeMode::cpu) {
    cuda::NvjpegOptions nv;
    nv.hardware_batch = o.hardware_batch;
    nv.hardware_share = o.hardware_share;
    try {
      for (int l = 0; l < o.decode_lanes; ++l)
        decoders.push_back(std::make_unique<cuda::NvjpegDecoder>(device, o.nvjpeg_backend, nv));
      description_ = str_cat(decoders[0]->describe(), "; ", o.decode_lanes, " decode lane",
                             o.decode_lanes > 1 ? "s" : "");
    } catch (const BackendError& e) {
      if (o.decode != DecodeMode::auto_) throw;
      mode_ = DecodeMode::cpu;  // auto: the CPU decodes, and the header says why
      description_ = str_cat(" (auto: nvJPEG unavailable: ", e.what(), ")");
      decoders.clear();
    }
  }
  for (int l = 0; l < o.decode_lanes; ++l) {
    auto lane = std::make_unique<Lane>();
    lane->number = lane->next_batch = l;
    lane->device = device;
    lane->stream = lane_stream(device, l);
    if (!decoders.empty()) lane->nvjpeg = std::move(decoders[static_cast<size_t>(l)]);
    lanes_.push_back(std::move(lane));
  }
  for (int i = 0; i < ring_->size(); ++i) {
    Slot& slot = ring_->slot_at(i);
    slot.decode_start = std::make_unique<cuda::Event>(true);
    slot.decoded = std::make_unique<cuda::Event>(true, true);  // workers sleep on it
    slot.crop_start = std::make_unique<cuda::Event>(true);
    slot.crop_end = std::make_unique<cuda::Event>(true);
    slot.consumed = std::make_unique<cuda::Event>(false);
    slot.wait_start = std::make_unique<cuda::Event>(true);
    slot.wait_end = std::make_unique<cuda::Event>(true);
  }
}

void DecodeLoader::lane_loop(int number) {
  const platform::ThreadRegistration registration("decode-gpu-" + std::to_string(number));
  Lane& lane = *lanes_[static_cast<size_t>(number)];
  cuda::DeviceGuard guard(lane.device);
  Ring& ring = *ring_;
  const auto lanes = static_cast<int64_t>(lanes_.size());
  std::unique_lock<std::mutex> lock(ring.mutex());
  while (true) {
    ring.stage_cv.wait(lock, [&] {
      return ring.stopped() ||
             (lane.next_batch < ring.batches() &&
              ring.holds(ring.slot_of(lane.next_batch), lane.next_batch, RingSlot::State::filled));
    });
    if (ring.stopped()) return;
    Slot& slot = ring.slot_of(lane.next_batch);
    lane.next_batch += lanes;
    slot.state = RingSlot::State::decoding;
    std::exception_ptr error = slot.error;
    lock.unlock();
    if (!error) {
      try {
        decode_on_device(slot, lane);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    ring.hand_on(slot, RingSlot::State::ready, error);
  }
}

namespace {

// A JPEG nvJPEG refused, decoded by the CPU at full size (its descriptor assumes that size) and copied into
// its place in the arena. False when the CPU cannot decode it either.
bool decode_refused_on_cpu(const std::string& path, const uint8_t* bytes, size_t size, CpuJpegDecoder decoder,
                           const cuda::JpegDecodeJob& job, cudaStream_t stream) {
  try {
    const EncodedImage image = inspect_encoded_image(path, std::vector<uint8_t>(bytes, bytes + size));
    const DecodedImage decoded = decode_encoded_image(path, image, decoder, 8);
    if (decoded.width != job.width || decoded.height != job.height) return false;
    // Pageable source: staged before the call returns.
    LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(job.dst, decoded.pixels.data(), decoded.pixels.size(),
                                       cudaMemcpyHostToDevice, stream));
    return true;
  } catch (const IOError&) {
    return false;
  }
}

}  // namespace

void DecodeLoader::decode_on_device(Slot& slot, Lane& lane) {
  {
    // The events are recorded again below: finish (or drop) the previous use's timing first.
    std::lock_guard<std::mutex> lock(ring_->mutex());
    resolve_timings(slot);
    slot.decode_timing = false;
  }
  try {
    issue_decode(slot, lane);
  } catch (...) {
    // Work may be queued that reads the staging: the worker refilling it must wait for it.
    slot.decoded->record(lane.stream);
    std::lock_guard<std::mutex> lock(ring_->mutex());
    slot.device_busy = true;
    throw;
  }
}

namespace {

// The host-staged pixels into the start of the arena, one copy per staging chunk.
size_t copy_staged(const decode_detail::StagingPool& pool, uint8_t* arena, cudaStream_t stream) {
  size_t bytes = 0;
  for (const auto* chunk : pool.used_chunks()) {
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(arena + chunk->start, chunk->data(), chunk->used, cudaMemcpyHostToDevice, stream));
    bytes += chunk->used;
  }
  return bytes;
}

}  // namespace

// nvJPEG's refusals go to the CPU decoder, else (skip policy) out of the batch; returns the CPU rescues.
int64_t DecodeLoader::rescue_refused(Slot& slot, Lane& lane, const std::vector<cuda::JpegDecodeJob>& jobs,
                                     const std::vector<size_t>& job_item) {
  int64_t cpu_fallback = 0;
  std::vector<bool> drop(slot.items.size(), false);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].ok) continue;
    const Item& item = slot.items[job_item[j]];
    const std::string& path = folder_->path(item.index);
    if (decode_refused_on_cpu(path, jobs[j].data, jobs[j].size, cpu_decoder_, jobs[j], lane.stream)) {
      ++cpu_fallback;
      continue;
    }
    const std::string reason = str_cat("neither nvJPEG nor ", cpu_jpeg_decoder_name(cpu_decoder_),
                                       " can decode it; the file is corrupt");
    LIFTOFF_CHECK(options_.on_bad_sample == BadSamplePolicy::skip, IOError, "image '", path, "': ", reason,
                  " (use --on-bad-sample skip to leave it out)");
    skip_bad(item.index, reason);
    drop[job_item[j]] = true;
  }
  std::vector<Item> kept;
  for (size_t i = 0; i < slot.items.size(); ++i) {
    if (!drop[i]) kept.push_back(slot.items[i]);
  }
  slot.items = std::move(kept);
  return cpu_fallback;
}

void DecodeLoader::issue_decode(Slot& slot, Lane& lane) {
  const int dev = lane.device;
  const cudaStream_t stream = lane.stream;
  // The previous batch of this slot must be fully read by its kernel before its arena is reused.
  slot.consumed->wait(stream);
  const size_t pixel_bytes = slot.pixels.total();
  size_t gpu_bytes = 0;
  for (const Item& item : slot.items) {
    if (item.gpu) gpu_bytes += static_cast<size_t>(item.desc.height) * item.desc.width * 3;
  }
  uint8_t* arena = ensure_device(slot.arena, slot.arena_capacity,
                                 std::max<size_t>(pixel_bytes + gpu_bytes, 1), dev, stream);
  slot.decode_start->record(stream);
  copy_staged(slot.pixels, arena, stream);
  // nvJPEG's outputs follow the host-decoded pixels.
  std::vector<cuda::JpegDecodeJob> jobs;
  std::vector<size_t> job_item;
  size_t at = pixel_bytes;
  for (size_t i = 0; i < slot.items.size(); ++i) {
    Item& item = slot.items[i];
    if (!item.gpu) continue;
    item.desc.offset = static_cast<int64_t>(at);
    cuda::JpegDecodeJob job;
    job.data = item.data;
    job.size = item.size;
    job.width = item.desc.width;
    job.height = item.desc.height;
    job.hardware = item.hardware;
    job.dst = arena + at;
    jobs.push_back(job);
    job_item.push_back(i);
    at += static_cast<size_t>(job.width) * job.height * 3;
  }
  // nvJPEG's hardware backend writes its outputs when called, not in stream order (public reports:
  // pytorch/vision#9606, meta-pytorch/torchcodec#1634, reproduced with nvJPEG 12.3-13.2 on H100s): a device-
  // side wait does not gate it. The lane thread waits on the host until its stream (the copies above, and
  // the wait for the previous batch's crop to have read this arena) has drained. Never the training thread.
  const bool hardware =
      std::any_of(jobs.begin(), jobs.end(), [](const cuda::JpegDecodeJob& j) { return j.hardware; });
  if (hardware) LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));
  cuda::JpegDecodeCounts nv;
  if (!jobs.empty()) lane.nvjpeg->decode(jobs, stream, nv);
  const int64_t cpu_fallback = rescue_refused(slot, lane, jobs, job_item);
  // Labels, then descriptors, in one copy.
  const size_t n = slot.items.size();
  const size_t meta_bytes = n * (sizeof(int64_t) + sizeof(CropDesc));
  if (meta_bytes > slot.meta_capacity) {
    slot.meta.reset();
    slot.meta_capacity = std::max(meta_bytes, slot.meta_capacity + slot.meta_capacity / 2);
    slot.meta = allocate_pinned_host(slot.meta_capacity);
  }
  auto* meta = static_cast<uint8_t*>(slot.meta.get());
  for (size_t i = 0; i < n; ++i) {
    const int64_t label = slot.items[i].label;
    std::memcpy(meta + i * sizeof(int64_t), &label, sizeof label);
    std::memcpy(meta + n * sizeof(int64_t) + i * sizeof(CropDesc), &slot.items[i].desc, sizeof(CropDesc));
  }
  uint8_t* device_meta = ensure_device(slot.device_meta, slot.device_meta_capacity,
                                       std::max<size_t>(meta_bytes, 1), dev, stream);
  if (meta_bytes > 0) {
    LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(device_meta, meta, meta_bytes, cudaMemcpyHostToDevice, stream));
  }
  slot.decoded->record(stream);
  std::lock_guard<std::mutex> lock(ring_->mutex());
  slot.device_busy = true;
  slot.decode_timing = true;
  slot.routes.hardware += nv.hardware;
  slot.routes.gpu_hybrid += nv.gpu_hybrid;
  slot.routes.batch_retries += nv.batch_retries;
  slot.routes.cpu_fallback += cpu_fallback;
  stats_.h2d_bytes += static_cast<int64_t>(slot.bytes.total() + pixel_bytes + meta_bytes);
}

void DecodeLoader::resolve_timings(Slot& slot) const {
  if (slot.decode_timing && slot.decoded->query()) {
    const double ms = cuda::Event::elapsed_ms(*slot.decode_start, *slot.decoded);
    stats_.h2d_ms += ms;
    ++stats_.h2d_timed;
    counts_.decode_ms += ms;
    ++counts_.decode_timed;
    slot.decode_timing = false;
  }
  if (slot.wait_timing && slot.wait_end->query()) {
    stats_.device_wait_ms += cuda::Event::elapsed_ms(*slot.wait_start, *slot.wait_end);
    ++stats_.device_wait_timed;
    slot.wait_timing = false;
  }
  if (slot.crop_timing && slot.crop_end->query()) {
    stats_.augment_ms += cuda::Event::elapsed_ms(*slot.crop_start, *slot.crop_end);
    ++stats_.augment_timed;
    slot.crop_timing = false;
  }
}

void DecodeLoader::hand_out_cuda(Slot& slot, Batch& out) {
  const Device device = options_.device;
  cuda::DeviceGuard guard(device.index);
  const cudaStream_t compute = cuda::compute_stream(device.index);
  const auto n = static_cast<int64_t>(slot.items.size());
  {
    std::lock_guard<std::mutex> lock(ring_->mutex());
    resolve_timings(slot);  // the events are about to be recorded again; an unfinished timing is dropped
    slot.crop_timing = slot.wait_timing = false;
  }
  // The device-side input wait: what the compute stream spends between these two events is time the
  // batch's decode (lane stream) held the device back.
  slot.wait_start->record(compute);
  slot.decoded->wait(compute);
  slot.wait_end->record(compute);
  const auto* meta = static_cast<const uint8_t*>(slot.device_meta.get());
  Tensor labels = Tensor::empty({n}, DType::i64, device);
  LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(labels.raw_data(), meta, static_cast<size_t>(n) * sizeof(int64_t),
                                     cudaMemcpyDeviceToDevice, compute));
  const MemoryFormat format = options_.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  Tensor input = Tensor::empty({n, options_.channels, options_.crop.out_height, options_.crop.out_width},
                               options_.input_dtype, device, format);
  cuda::CropLaunch a;
  a.pixels = static_cast<const uint8_t*>(slot.arena.get());
  a.descs = reinterpret_cast<const CropDesc*>(meta + static_cast<size_t>(n) * sizeof(int64_t));
  a.out = input.raw_data();
  a.out_dtype = options_.input_dtype;
  a.format = format;
  a.batch = n;
  a.channels = options_.channels;
  a.height = options_.crop.out_height;
  a.width = options_.crop.out_width;
  for (size_t c = 0; c < mean_.size(); ++c) {
    a.mean[c] = mean_[c];
    a.stddev[c] = stddev_[c];
  }
  slot.crop_start->record(compute);
  cuda::launch_resized_crop(a, compute);
  slot.crop_end->record(compute);
  slot.consumed->record(compute);
  {
    std::lock_guard<std::mutex> lock(ring_->mutex());
    slot.crop_timing = slot.wait_timing = true;
  }
  out.images_u8 = Tensor();
  out.input = input;
  out.labels = labels;
}

}  // namespace liftoff
