#include "data/decode/nvjpeg_decoder.h"

#include <algorithm>

#include "data/decode/decode_stream.h"
#include "data/decode/image_decode.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/error.h"

namespace liftoff::cuda {

namespace {

int backend_value(NvjpegBackend backend) {
  switch (backend) {
    case NvjpegBackend::hardware:
      return nvjpeg::kBackendHardware;
    case NvjpegBackend::hybrid:
      return nvjpeg::kBackendHybrid;
    default:
      return nvjpeg::kBackendGpuHybrid;
  }
}

}  // namespace

NvjpegDecoder::NvjpegDecoder(int device, NvjpegBackend requested, NvjpegOptions options)
    : device_(device), options_(options) {
  nvjpeg::api();  // throws BackendError with the reason when the library is absent
  LIFTOFF_CHECK(
      options_.hardware_batch >= -1 && options_.hardware_share >= 0.0 && options_.hardware_share <= 1.0,
      ValueError, "nvJPEG: hardware batch ", options_.hardware_batch, " (>= -1) or share ",
      options_.hardware_share, " (in [0, 1]) out of range");
  DeviceGuard guard(device_);
  try {
    create_engines(requested);
    hybrid_stream_ = create_decode_stream(device_);
    LIFTOFF_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    LIFTOFF_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  } catch (...) {
    release();
    throw;
  }
  hardware_batch_ = preferred_hardware_batch(options_.hardware_batch);
  warm_up();
}

// One image through each engine before any batch: their first calls set up the engine and allocate buffers
// (for one 512 x 512 image; a larger batch or image still allocates more), which mid-run stall the lane and,
// through cudaFree, the device (on an H100 a hybrid run's first nvJPEG batches came with a step of 325-373
// ms; not yet measured with this). Best effort: a failure here leaves that cost to the first batch.
void NvjpegDecoder::warm_up() noexcept {
  constexpr int kSide = 512;
  cudaStream_t stream = nullptr;
  uint8_t* dst = nullptr;
  std::vector<uint8_t> bytes;  // read by the decode until the stream's synchronisation below
  try {
    std::vector<uint8_t> rgb(static_cast<size_t>(kSide) * kSide * 3);
    for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 7 + i / 1536 * 13) & 0xFF);
    JpegEncodeOptions encode;
    encode.quality = 85;  // baseline 4:2:0: what the hardware engine takes
    bytes = encode_jpeg(rgb.data(), kSide, kSide, encode);
    stream = create_decode_stream(device_);
    LIFTOFF_CUDA_CHECK(cudaMalloc(&dst, rgb.size()));
    for (const bool hardware : {true, false}) {
      std::vector<JpegDecodeJob> jobs(1);
      jobs[0].data = bytes.data();
      jobs[0].size = bytes.size();
      jobs[0].width = jobs[0].height = kSide;
      jobs[0].hardware = hardware;
      jobs[0].dst = dst;
      JpegDecodeCounts counts;
      decode(jobs, stream, counts);
      LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host bytes are read by then
    }
  } catch (...) {
    cudaGetLastError();  // a failed warm-up is not the first batch's error
  }
  // After a failure the GPU-hybrid engine's stream may not have joined `stream`: both are drained before the
  // bytes and the destination go.
  if (hybrid_stream_ != nullptr) cudaStreamSynchronize(hybrid_stream_);
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (dst != nullptr) cudaFree(dst);
}

void NvjpegDecoder::release() noexcept {
  destroy(hybrid_);
  destroy(primary_);
  // Only after the engines: their queued work is on these streams.
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (hybrid_stream_ != nullptr) cudaStreamDestroy(hybrid_stream_);
  join_ = fork_ = nullptr;
  hybrid_stream_ = nullptr;
}

int NvjpegDecoder::preferred_hardware_batch(int requested) const {
  if (requested >= 0 || primary_backend_ != NvjpegBackend::hardware) return std::max(requested, 0);
  const nvjpeg::Api& a = nvjpeg::api();
  unsigned engines = 0, cores = 0;
  if (a.GetHardwareDecoderInfo == nullptr ||
      a.GetHardwareDecoderInfo(primary_.handle, &engines, &cores) != nvjpeg::kSuccess)
    return 0;
  return static_cast<int>(std::min(engines * cores, 4096u));
}

void NvjpegDecoder::create_engines(NvjpegBackend requested) {
  std::string why;
  if (requested == NvjpegBackend::auto_ || requested == NvjpegBackend::hardware) {
    if (create(primary_, NvjpegBackend::hardware, &why)) {
      primary_backend_ = NvjpegBackend::hardware;
    } else {
      hardware_refusal_ = why;
      LIFTOFF_CHECK(requested == NvjpegBackend::auto_, BackendError,
                    "nvJPEG: the hardware backend is not available on cuda:", device_, " (", why,
                    "); use --nvjpeg-backend auto or gpu-hybrid");
    }
  }
  const NvjpegBackend software =
      requested == NvjpegBackend::hybrid ? NvjpegBackend::hybrid : NvjpegBackend::gpu_hybrid;
  Engine& fallback = primary_.handle != nullptr ? hybrid_ : primary_;
  if (!create(fallback, software, &why)) {
    // The GPU-hybrid backend is refused on some GPUs/drivers: the CPU-Huffman one decodes everything.
    LIFTOFF_CHECK(software != NvjpegBackend::hybrid && create(fallback, NvjpegBackend::hybrid, &why),
                  BackendError, "nvJPEG: cannot create a decoder on cuda:", device_, " (", why, ")");
  }
  primary_backend_ = primary_.backend;
}

NvjpegDecoder::~NvjpegDecoder() {
  DeviceGuard guard(device_);
  release();
}

bool NvjpegDecoder::create(Engine& engine, NvjpegBackend backend, std::string* why) {
  const nvjpeg::Api& a = nvjpeg::api();
  int rc = a.CreateEx(backend_value(backend), nullptr, nullptr, nvjpeg::kFlagsDefault, &engine.handle);
  for (Batched& batched : engine.batched) {
    if (rc == nvjpeg::kSuccess) rc = a.JpegStateCreate(engine.handle, &batched.state);
  }
  // One-by-one retries run on the software engine only.
  if (rc == nvjpeg::kSuccess && backend != NvjpegBackend::hardware)
    rc = a.JpegStateCreate(engine.handle, &engine.single);
  // The hardware backend can be created and still refuse batches (no JPEG engine): try one initialisation.
  if (rc == nvjpeg::kSuccess)
    rc = a.DecodeBatchedInitialize(engine.handle, engine.batched[0].state, 1, 1, nvjpeg::kOutputRgbi);
  if (rc != nvjpeg::kSuccess) {
    *why = str_cat(decode_backend_name(backend), ": ", nvjpeg::status_name(rc));
    destroy(engine);
    return false;
  }
  engine.batched[0].batch_size = 1;
  engine.backend = backend;
  return true;
}

void NvjpegDecoder::destroy(Engine& engine) noexcept {
  if (!nvjpeg::loaded()) return;
  const nvjpeg::Api& a = nvjpeg::api();
  if (engine.single != nullptr) a.JpegStateDestroy(engine.single);
  for (Batched& batched : engine.batched) {
    if (batched.state != nullptr) a.JpegStateDestroy(batched.state);
  }
  if (engine.handle != nullptr) a.Destroy(engine.handle);
  engine = Engine{};
}

std::string NvjpegDecoder::describe() const {
  std::string text = str_cat("nvJPEG ", decode_backend_name(primary_backend_), " backend");
  if (hybrid_.handle != nullptr)
    text += str_cat(" (+ ", decode_backend_name(hybrid_.backend), " for progressive/other JPEGs)");
  text += ", " + nvjpeg::describe_library();
  if (primary_backend_ == NvjpegBackend::hardware) {
    text += hardware_batch_ > 0 ? str_cat(", ", hardware_batch_, " images per hardware call")
                                : std::string(", whole batches per hardware call");
    if (options_.hardware_share < 1.0)
      text += str_cat(", ", static_cast<int>(options_.hardware_share * 100.0 + 0.5),
                      "% of them on the hardware engine");
  }
  if (!hardware_refusal_.empty()) text += str_cat("; hardware backend refused: ", hardware_refusal_);
  return text;
}

bool NvjpegDecoder::header_agrees(JpegDecodeJob& job) {
  // nvJPEG writes what its own parse says: a file that reads differently to it than to our walk could make it
  // write past the destination, so it goes to the CPU instead.
  int components = 0, subsampling = 0;
  int widths[nvjpeg::kMaxComponent] = {}, heights[nvjpeg::kMaxComponent] = {};
  const int rc = nvjpeg::api().GetImageInfo(primary_.handle, job.data, job.size, &components, &subsampling,
                                            widths, heights);
  return rc == nvjpeg::kSuccess && widths[0] == job.width && heights[0] == job.height;
}

bool NvjpegDecoder::decode_batched(Engine& engine, Batched& batched, JpegDecodeJob* const* jobs, size_t count,
                                   cudaStream_t stream) {
  const nvjpeg::Api& a = nvjpeg::api();
  const int n = static_cast<int>(count);
  data_.resize(count);
  lengths_.resize(count);
  images_.assign(count, nvjpeg::Image{});
  for (size_t i = 0; i < count; ++i) {
    data_[i] = jobs[i]->data;
    lengths_[i] = jobs[i]->size;
    images_[i].channel[0] = jobs[i]->dst;
    images_[i].pitch[0] = static_cast<size_t>(jobs[i]->width) * 3;
  }
  if (batched.batch_size != n) {
    if (a.DecodeBatchedInitialize(engine.handle, batched.state, n, 1, nvjpeg::kOutputRgbi) !=
        nvjpeg::kSuccess) {
      batched.batch_size = -1;
      return false;
    }
    batched.batch_size = n;
  }
  if (a.DecodeBatched(engine.handle, batched.state, data_.data(), lengths_.data(), images_.data(), stream) !=
      nvjpeg::kSuccess) {
    batched.batch_size = -1;  // nvJPEG: re-initialise after a failed batch
    return false;
  }
  for (size_t i = 0; i < count; ++i) jobs[i]->ok = true;
  return true;
}

bool NvjpegDecoder::decode_single(Engine& engine, JpegDecodeJob& job, cudaStream_t stream) {
  nvjpeg::Image image{};
  image.channel[0] = job.dst;
  image.pitch[0] = static_cast<size_t>(job.width) * 3;
  job.ok = nvjpeg::api().Decode(engine.handle, engine.single, job.data, job.size, nvjpeg::kOutputRgbi, &image,
                                stream) == nvjpeg::kSuccess;
  return job.ok;
}

// The group in calls of `chunk` images (0: one call) on `stream`; a failed call is retried image by image on
// the GPU-hybrid engine's stream (its single state lives there), after what `stream` queued so far.
void NvjpegDecoder::decode_group(Engine& engine, std::vector<JpegDecodeJob*>& group, int chunk,
                                 cudaStream_t stream, int64_t& counter, JpegDecodeCounts& counts) {
  Engine& software = hybrid_.handle != nullptr ? hybrid_ : primary_;
  const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : group.size();
  for (size_t at = 0; at < group.size(); at += step) {
    const size_t count = std::min(step, group.size() - at);
    // Calls of the preferred size keep one initialised state; the remainder has its own.
    Batched& batched = engine.batched[count == step ? 0 : 1];
    if (decode_batched(engine, batched, group.data() + at, count, stream)) {
      counter += static_cast<int64_t>(count);
      continue;
    }
    ++counts.batch_retries;
    if (stream != hybrid_stream_) {
      LIFTOFF_CUDA_CHECK(cudaEventRecord(fork_, stream));
      LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(hybrid_stream_, fork_, 0));
    }
    for (size_t i = at; i < at + count; ++i) {
      if (decode_single(software, *group[i], hybrid_stream_)) ++counts.gpu_hybrid;
    }
  }
}

void NvjpegDecoder::decode(std::vector<JpegDecodeJob>& jobs, cudaStream_t stream, JpegDecodeCounts& counts) {
  DeviceGuard guard(device_);
  Engine& software = hybrid_.handle != nullptr ? hybrid_ : primary_;
  const bool has_hardware = primary_backend_ == NvjpegBackend::hardware;
  std::vector<JpegDecodeJob*> hardware, other;
  for (JpegDecodeJob& job : jobs) {
    job.ok = false;
    if (!header_agrees(job)) continue;
    (has_hardware && job.hardware ? hardware : other).push_back(&job);
  }
  if (options_.hardware_share < 1.0) {
    // The hardware engine's share; the rest decodes on the GPU-hybrid engine at the same time.
    const auto keep =
        static_cast<size_t>(static_cast<double>(hardware.size()) * options_.hardware_share + 0.5);
    other.insert(other.begin(), hardware.begin() + static_cast<std::ptrdiff_t>(keep), hardware.end());
    hardware.resize(keep);
  }
  // The GPU-hybrid stream starts after what the caller queued (the destinations are free), and the caller's
  // stream continues after both engines.
  LIFTOFF_CUDA_CHECK(cudaEventRecord(fork_, stream));
  LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(hybrid_stream_, fork_, 0));
  // The hardware engine first: its host part is short, and it decodes while the host works for GPU-hybrid.
  if (!hardware.empty()) decode_group(primary_, hardware, hardware_batch_, stream, counts.hardware, counts);
  if (!other.empty()) decode_group(software, other, 0, hybrid_stream_, counts.gpu_hybrid, counts);
  LIFTOFF_CUDA_CHECK(cudaEventRecord(join_, hybrid_stream_));
  LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(stream, join_, 0));
  for (const JpegDecodeJob& job : jobs) counts.failed += job.ok ? 0 : 1;
}

}  // namespace liftoff::cuda
