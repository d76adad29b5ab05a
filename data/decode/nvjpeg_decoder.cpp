#include "data/decode/nvjpeg_decoder.h"

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

NvjpegDecoder::NvjpegDecoder(int device, NvjpegBackend requested) : device_(device) {
  nvjpeg::api();  // throws BackendError with the reason when the library is absent
  DeviceGuard guard(device_);
  try {
    create_engines(requested);
  } catch (...) {
    destroy(hybrid_);
    destroy(primary_);
    throw;
  }
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
  destroy(hybrid_);
  destroy(primary_);
}

bool NvjpegDecoder::create(Engine& engine, NvjpegBackend backend, std::string* why) {
  const nvjpeg::Api& a = nvjpeg::api();
  int rc = a.CreateEx(backend_value(backend), nullptr, nullptr, nvjpeg::kFlagsDefault, &engine.handle);
  if (rc == nvjpeg::kSuccess) rc = a.JpegStateCreate(engine.handle, &engine.batched);
  // One-by-one retries run on the software engine only.
  if (rc == nvjpeg::kSuccess && backend != NvjpegBackend::hardware)
    rc = a.JpegStateCreate(engine.handle, &engine.single);
  // The hardware backend can be created and still refuse batches (no JPEG engine): try one initialisation.
  if (rc == nvjpeg::kSuccess)
    rc = a.DecodeBatchedInitialize(engine.handle, engine.batched, 1, 1, nvjpeg::kOutputRgbi);
  if (rc != nvjpeg::kSuccess) {
    *why = str_cat(decode_backend_name(backend), ": ", nvjpeg::status_name(rc));
    destroy(engine);
    return false;
  }
  engine.batch_size = 1;
  engine.backend = backend;
  return true;
}

void NvjpegDecoder::destroy(Engine& engine) noexcept {
  if (!nvjpeg::loaded()) return;
  const nvjpeg::Api& a = nvjpeg::api();
  if (engine.single != nullptr) a.JpegStateDestroy(engine.single);
  if (engine.batched != nullptr) a.JpegStateDestroy(engine.batched);
  if (engine.handle != nullptr) a.Destroy(engine.handle);
  engine = Engine{};
}

std::string NvjpegDecoder::describe() const {
  std::string text = str_cat("nvJPEG ", decode_backend_name(primary_backend_), " backend");
  if (hybrid_.handle != nullptr)
    text += str_cat(" (+ ", decode_backend_name(hybrid_.backend), " for progressive/other JPEGs)");
  text += ", " + nvjpeg::describe_library();
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

bool NvjpegDecoder::decode_batched(Engine& engine, const std::vector<JpegDecodeJob*>& jobs,
                                   cudaStream_t stream) {
  if (jobs.empty()) return true;
  const nvjpeg::Api& a = nvjpeg::api();
  const int n = static_cast<int>(jobs.size());
  data_.resize(jobs.size());
  lengths_.resize(jobs.size());
  images_.assign(jobs.size(), nvjpeg::Image{});
  for (size_t i = 0; i < jobs.size(); ++i) {
    data_[i] = jobs[i]->data;
    lengths_[i] = jobs[i]->size;
    images_[i].channel[0] = jobs[i]->dst;
    images_[i].pitch[0] = static_cast<size_t>(jobs[i]->width) * 3;
  }
  if (engine.batch_size != n) {
    if (a.DecodeBatchedInitialize(engine.handle, engine.batched, n, 1, nvjpeg::kOutputRgbi) !=
        nvjpeg::kSuccess) {
      engine.batch_size = -1;
      return false;
    }
    engine.batch_size = n;
  }
  if (a.DecodeBatched(engine.handle, engine.batched, data_.data(), lengths_.data(), images_.data(), stream) !=
      nvjpeg::kSuccess) {
    engine.batch_size = -1;  // nvJPEG: re-initialise after a failed batch
    return false;
  }
  for (JpegDecodeJob* job : jobs) job->ok = true;
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
  const auto run = [&](Engine& engine, std::vector<JpegDecodeJob*>& group, int64_t& counter) {
    if (decode_batched(engine, group, stream)) {
      counter += static_cast<int64_t>(group.size());
      return;
    }
    ++counts.batch_retries;
    for (JpegDecodeJob* job : group) {
      if (decode_single(software, *job, stream)) ++counts.gpu_hybrid;
    }
  };
  run(primary_, hardware, counts.hardware);
  run(software, other, counts.gpu_hybrid);
  for (const JpegDecodeJob& job : jobs) counts.failed += job.ok ? 0 : 1;
}

}  // namespace liftoff::cuda
