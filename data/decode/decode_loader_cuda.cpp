// The CUDA side of DecodeLoader: the decode stream and thread (copies, nvJPEG), the crop kernel's launch in
// next(), and the device timings.
#include <cstring>

#include "data/decode/crop_cuda.h"
#include "data/decode/decode_loader_internal.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/platform/cpu_usage.h"

namespace liftoff {

namespace {

// One decode stream per device, made once and kept: cached device blocks stay keyed to it.
cudaStream_t decode_stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mutex);
  if (streams.size() <= static_cast<size_t>(device)) streams.resize(static_cast<size_t>(device) + 1, nullptr);
  cudaStream_t& s = streams[static_cast<size_t>(device)];
  if (s == nullptr) {
    cuda::DeviceGuard guard(device);
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

}  // namespace

void DecodeLoader::init_device() {
  device_ = std::make_unique<Device_>();
  device_->device = options_.device.index;
  cuda::DeviceGuard guard(device_->device);
  device_->stream = decode_stream(device_->device);
  if (mode_ == DecodeMode::gpu) {
    try {
      device_->nvjpeg = std::make_unique<cuda::NvjpegDecoder>(device_->device, options_.nvjpeg_backend);
      description_ = "gpu: " + device_->nvjpeg->describe();
    } catch (const BackendError& e) {
      if (options_.decode == DecodeMode::gpu) throw;
      mode_ = DecodeMode::cpu;  // auto: the CPU decodes, and the header says why
      description_ = str_cat(" (auto: nvJPEG unavailable: ", e.what(), ")");
    }
  }
  for (auto& slot : slots_) {
    slot->decode_start = std::make_unique<cuda::Event>(true);
    slot->decoded = std::make_unique<cuda::Event>(true, true);  // workers sleep on it
    slot->crop_start = std::make_unique<cuda::Event>(true);
    slot->crop_end = std::make_unique<cuda::Event>(true);
    slot->consumed = std::make_unique<cuda::Event>(false);
  }
}

void DecodeLoader::decode_loop() {
  const platform::ThreadRegistration registration("decode-gpu");
  cuda::DeviceGuard guard(device_->device);
  const auto k = static_cast<int64_t>(slots_.size());
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    decode_cv_.wait(lock, [&] {
      if (stop_) return true;
      if (next_decode_ >= batches_) return false;
      const Slot& s = *slots_[static_cast<size_t>(next_decode_ % k)];
      return s.state == Slot::State::filled && s.batch == next_decode_ && s.generation == generation_;
    });
    if (stop_) return;
    Slot& slot = *slots_[static_cast<size_t>(next_decode_ % k)];
    ++next_decode_;
    slot.state = Slot::State::decoding;
    const uint64_t generation = generation_;
    std::exception_ptr error = slot.error;
    lock.unlock();
    if (!error) {
      try {
        decode_on_device(slot);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (generation != generation_ || stop_) {
      release_slot_locked(slot);
      work_cv_.notify_all();
      continue;
    }
    slot.error = error;
    slot.state = Slot::State::ready;
    ready_cv_.notify_all();
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

void DecodeLoader::decode_on_device(Slot& slot) {
  {
    // The events are recorded again below: finish (or drop) the previous use's timing first.
    std::lock_guard<std::mutex> lock(mutex_);
    resolve_timings(slot);
    slot.decode_timing = false;
  }
  const cudaStream_t stream = device_->stream;
  try {
    issue_decode(slot);
  } catch (...) {
    // Work may be queued that reads the staging buffers: the worker refilling them must wait for it.
    slot.decoded->record(stream);
    std::lock_guard<std::mutex> lock(mutex_);
    slot.device_busy = true;
    throw;
  }
}

void DecodeLoader::issue_decode(Slot& slot) {
  const int dev = device_->device;
  const cudaStream_t stream = device_->stream;
  // The previous batch of this slot must be fully read by its kernel before its arena is reused.
  slot.consumed->wait(stream);
  size_t gpu_bytes = 0;
  for (const Item& item : slot.items) {
    if (item.gpu) gpu_bytes += static_cast<size_t>(item.desc.height) * item.desc.width * 3;
  }
  uint8_t* arena = slot.arena.ensure(slot.pixel_bytes + gpu_bytes, dev, stream);
  slot.decode_start->record(stream);
  if (slot.pixel_bytes > 0) {
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(arena, slot.pixels.data(), slot.pixel_bytes, cudaMemcpyHostToDevice, stream));
  }
  // nvJPEG's outputs follow the host-decoded pixels.
  std::vector<cuda::JpegDecodeJob> jobs;
  std::vector<size_t> job_item;
  size_t at = slot.pixel_bytes;
  for (size_t i = 0; i < slot.items.size(); ++i) {
    Item& item = slot.items[i];
    if (!item.gpu) continue;
    item.desc.offset = static_cast<int64_t>(at);
    cuda::JpegDecodeJob job;
    job.data = slot.bytes.data() + item.at;
    job.size = item.size;
    job.width = item.desc.width;
    job.height = item.desc.height;
    job.hardware = item.hardware;
    job.dst = arena + at;
    jobs.push_back(job);
    job_item.push_back(i);
    at += static_cast<size_t>(job.width) * job.height * 3;
  }
  cuda::JpegDecodeCounts nv;
  if (!jobs.empty()) device_->nvjpeg->decode(jobs, stream, nv);
  int64_t cpu_fallback = 0;
  std::vector<bool> drop(slot.items.size(), false);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].ok) continue;
    const Item& item = slot.items[job_item[j]];
    const std::string& path = folder_->path(item.index);
    if (decode_refused_on_cpu(path, jobs[j].data, jobs[j].size, cpu_decoder_, jobs[j], stream)) {
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
  // Labels, then descriptors, in one copy.
  const size_t n = slot.items.size();
  const size_t meta_bytes = n * (sizeof(int64_t) + sizeof(CropDesc));
  uint8_t* meta = slot.meta.ensure(std::max<size_t>(meta_bytes, 1));
  for (size_t i = 0; i < n; ++i) {
    const int64_t label = slot.items[i].label;
    std::memcpy(meta + i * sizeof(int64_t), &label, sizeof label);
    std::memcpy(meta + n * sizeof(int64_t) + i * sizeof(CropDesc), &slot.items[i].desc, sizeof(CropDesc));
  }
  uint8_t* device_meta = slot.device_meta.ensure(std::max<size_t>(meta_bytes, 1), dev, stream);
  if (meta_bytes > 0) {
    LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(device_meta, meta, meta_bytes, cudaMemcpyHostToDevice, stream));
  }
  slot.decoded->record(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  slot.device_busy = true;
  slot.decode_timing = true;
  counts_.hardware += nv.hardware;
  counts_.gpu_hybrid += nv.gpu_hybrid;
  counts_.batch_retries += nv.batch_retries;
  counts_.cpu_fallback += cpu_fallback;
  stats_.h2d_bytes += static_cast<int64_t>(slot.file_bytes + slot.pixel_bytes + meta_bytes);
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
    std::lock_guard<std::mutex> lock(mutex_);
    resolve_timings(slot);  // the events are about to be recorded again; an unfinished timing is dropped
    slot.crop_timing = false;
  }
  slot.decoded->wait(compute);
  const auto* meta = static_cast<const uint8_t*>(slot.device_meta.data());
  Tensor labels = Tensor::empty({n}, DType::i64, device);
  LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(labels.raw_data(), meta, static_cast<size_t>(n) * sizeof(int64_t),
                                     cudaMemcpyDeviceToDevice, compute));
  const MemoryFormat format = options_.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  Tensor input = Tensor::empty({n, options_.channels, options_.crop.out_height, options_.crop.out_width},
                               options_.input_dtype, device, format);
  cuda::CropLaunch a;
  a.pixels = slot.arena.data();
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
    std::lock_guard<std::mutex> lock(mutex_);
    slot.crop_timing = true;
  }
  out.images_u8 = Tensor();
  out.input = input;
  out.labels = labels;
}

}  // namespace liftoff
