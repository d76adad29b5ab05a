// Batched JPEG decoding with nvJPEG straight into device memory (interleaved RGB). Two engines: the primary
// one (the hardware JPEG decoder where the GPU has one, NVJPEG_BACKEND_HARDWARE, batched API) takes the
// baseline single-scan images data/decode/image_decode.h routes to `hardware` (all of them, or a share: see
// NvjpegOptions), in calls of its preferred size; a GPU-hybrid engine takes the rest (progressive, several
// scans, other chroma layouts) on a second stream of its own, so both engines work at once, joined back into
// the caller's stream. A batch that fails is retried image by image on the GPU-hybrid engine; an image that
// fails there too is reported back (ok = false) for the CPU decoder. Not thread-safe: one thread owns a
// decoder (nvJPEG's states are per thread); several decoders run side by side (DecodeLoader's lanes).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/decode/decode_options.h"
#include "runtime/cuda/nvjpeg_loader.h"

namespace liftoff::cuda {

struct JpegDecodeJob {
  const uint8_t* data = nullptr;  // host bytes (pinned), alive until the decode's stream work completed
  size_t size = 0;
  int width = 0, height = 0;  // from our own header walk; nvJPEG must agree or the job goes to the CPU
  bool hardware = false;      // routed to the hardware engine
  uint8_t* dst = nullptr;     // device, 3 * width * height bytes
  bool ok = false;            // set by decode()
};

struct NvjpegOptions {
  // Images per call of the hardware engine: 0: all of a decode() call's in one call; -1: the decoder's
  // engines x cores (nvjpegGetHardwareDecoderInfo; all at once when the library does not say); n > 0: n.
  int hardware_batch = 0;
  // Share of the hardware-decodable images the hardware engine gets (the first ones of each call); the rest
  // go to the GPU-hybrid engine, which decodes them at the same time.
  double hardware_share = 1.0;
};

struct JpegDecodeCounts {
  int64_t hardware = 0;       // decoded by the primary engine's batches (hardware backend when it has it)
  int64_t gpu_hybrid = 0;     // decoded by the GPU-hybrid engine (batched or one by one)
  int64_t batch_retries = 0;  // batches that failed and were retried image by image
  int64_t failed = 0;         // left to the CPU
};

class NvjpegDecoder {
 public:
  // Throws BackendError when nvJPEG cannot be loaded or no engine can be created on `device`.
  NvjpegDecoder(int device, NvjpegBackend requested, NvjpegOptions options = {});
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  NvjpegBackend primary_backend() const { return primary_backend_; }
  // For the run header: "nvJPEG hardware backend (+ GPU-hybrid for progressive/other JPEGs), libnvjpeg.so.13
  // (nvJPEG 13.0.0)" and, when the hardware backend was asked for but refused, why.
  std::string describe() const;

  // Images per hardware call in effect (0: all at once).
  int hardware_batch() const { return hardware_batch_; }

  // Decodes every job on `stream` (queued work: the bytes and destinations must stay valid until what is
  // queued on `stream` when it returns completes). Sets job.ok.
  void decode(std::vector<JpegDecodeJob>& jobs, cudaStream_t stream, JpegDecodeCounts& counts);

 private:
  struct Batched {
    nvjpeg::State state = nullptr;
    int batch_size = -1;  // what the state was initialised for (-1: must initialise)
  };
  struct Engine {
    nvjpeg::Handle handle = nullptr;
    // Batched states: [0] for calls of the preferred size, [1] for the remainder (re-initialised when the
    // size changes: nvJPEG wants that per size, and it costs allocations).
    Batched batched[2];
    nvjpeg::State single = nullptr;
    NvjpegBackend backend = NvjpegBackend::gpu_hybrid;
  };
  void create_engines(NvjpegBackend requested);
  void warm_up() noexcept;
  bool create(Engine& engine, NvjpegBackend backend, std::string* why);
  void destroy(Engine& engine) noexcept;
  void release() noexcept;
  bool decode_batched(Engine& engine, Batched& state, JpegDecodeJob* const* jobs, size_t count,
                      cudaStream_t stream);
  void decode_group(Engine& engine, std::vector<JpegDecodeJob*>& group, int chunk, cudaStream_t stream,
                    int64_t& counter, JpegDecodeCounts& counts);
  int preferred_hardware_batch(int requested) const;
  bool decode_single(Engine& engine, JpegDecodeJob& job, cudaStream_t stream);
  bool header_agrees(JpegDecodeJob& job);

  int device_ = 0;
  NvjpegOptions options_;
  int hardware_batch_ = 0;
  cudaStream_t hybrid_stream_ = nullptr;         // the GPU-hybrid engine's, joined into the caller's
  cudaEvent_t fork_ = nullptr, join_ = nullptr;  // ordering between the two streams
  NvjpegBackend primary_backend_ = NvjpegBackend::gpu_hybrid;
  std::string hardware_refusal_;
  Engine primary_;  // hardware (or the GPU-hybrid engine itself when the hardware one is absent)
  Engine hybrid_;   // GPU-hybrid (or hybrid); unused when primary_ is already one
  std::vector<const unsigned char*> data_;
  std::vector<size_t> lengths_;
  std::vector<nvjpeg::Image> images_;
};

}  // namespace liftoff::cuda
