// model_panel: training speed of one model as a user runs it (built by make_model from public layers, trained
// by the library's Trainer with its defaults: CUDA graphs auto, AMP as asked), on random inputs already on
// the device, so the figure is the model's step and nothing else. Throughput is images between two
// device-synchronised marks over the wall time between them; the PyTorch twin is
// tools/reference/model_panel.py (same models, batch, precision, optimizer).
//   model_panel --model resnet18 --image-size 32 --batch 128 --amp bf16 --steps 50 --warmup 20
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "liftoff.h"
#include "runtime/profile/flops.h"

namespace {

using namespace liftoff;

// Four fixed random batches on the device (random, never zeros), made once per run: drawing them on the host
// took about 20 s a set at 512 px, batch 128.
std::vector<Batch> device_batches(int64_t batch, int64_t channels, int64_t size, int64_t classes,
                                  Device device) {
  Generator gen(1234);
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) {
    Batch b;
    b.input = randn({batch, channels, size, size}, gen).to(device);
    b.labels = rand_uniform({batch}, gen, 0.0, static_cast<double>(classes) - 1e-3).to(DType::i64).to(device);
    batches.push_back(b);
  }
  return batches;
}

// Serves `batches` in turn for `steps` batches an epoch (no host work per step).
class DeviceBatches : public BatchSource {
 public:
  DeviceBatches(const std::vector<Batch>& batches, int64_t steps) : batches_(batches), steps_(steps) {}
  void start_epoch(int64_t) override { served_ = 0; }
  bool next(Batch& out) override {
    if (served_ >= steps_) return false;
    out = batches_[static_cast<size_t>(served_++) % batches_.size()];
    return true;
  }
  int64_t batches_per_epoch() const override { return steps_; }

 private:
  const std::vector<Batch>& batches_;
  int64_t steps_ = 0;
  int64_t served_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"model_panel: training images/s of a model built from public layers, on device-resident data"};
  std::string model = "resnet18", amp = "bf16", device_name = "cuda", graphs = "auto";
  int64_t image_size = 32, channels = 3, classes = 10, batch = 128, steps = 50, warmup = 20, accum = 1;
  app.add_option("--model", model, "a make_model name")->capture_default_str();
  app.add_option("--image-size", image_size, "input side in pixels")->capture_default_str();
  app.add_option("--channels", channels, "input channels")->capture_default_str();
  app.add_option("--classes", classes, "output classes")->capture_default_str();
  app.add_option("--batch", batch, "images per micro-batch")->capture_default_str();
  app.add_option("--accum", accum, "micro-batches per optimizer step")->capture_default_str();
  app.add_option("--amp", amp, "bf16, fp16 or off")->capture_default_str();
  app.add_option("--device", device_name, "cuda or cpu")->capture_default_str();
  app.add_option("--cuda-graphs", graphs, "auto, on or off")->capture_default_str();
  app.add_option("--steps", steps, "timed optimizer steps")->capture_default_str();
  app.add_option("--warmup", warmup, "optimizer steps before the timing starts")->capture_default_str();
  int64_t profile_steps = 0;
  app.add_option("--profile-steps", profile_steps,
                 "after the timing, this many more steps inside a profiler range (run under "
                 "`ncu --profile-from-start off` to see their kernels)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_name);
    // The panel measures models as a user writes them: the zoo's strided CNN calls batch_norm2d_relu
    // explicitly by default, so the panel builds its plain form (conv, BatchNorm2d, relu); the ResNets,
    // MobileNetV2 and ViT of the zoo are written that way already.
    Generator gen(42);
    std::unique_ptr<Module> net = model == "strided_cnn"
                                      ? std::make_unique<StridedCNN>(channels, classes, gen, false)
                                      : make_model(model, channels, classes, image_size, 42);
    net->to(device);
    SGD optimizer(net->parameters(), 0.05, 0.9, 5e-4, true);
    TrainerOptions options;
    options.accum = accum;
    options.amp = parse_amp(amp);
    options.cuda_graphs = parse_graph_mode(graphs);
    Trainer trainer(*net, optimizer, nullptr, options);
    int64_t params = 0;
    for (const Tensor& p : net->parameters()) params += p.numel();
    const std::vector<Batch> batches = device_batches(batch, channels, image_size, classes, device);
    DeviceBatches warm(batches, warmup * accum);
    trainer.train_epoch(warm, 0);  // synchronises the device at its end
    DeviceBatches timed(batches, steps * accum);
    const auto start = std::chrono::steady_clock::now();
    const EpochResult r = trainer.train_epoch(timed, 1);  // ends with a device synchronisation
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const GraphStatus& gs = trainer.graph_status();
    const double images_per_second = static_cast<double>(r.images) / seconds;
    // MFU as the report computes it: counted forward FLOPs x 3 per image over the GPU's peak for the
    // precision.
    const ComputeRate rate =
        compute_rate(trainer.model_flops_per_image(), images_per_second,
                     device.is_cuda() ? cuda_device_name(device.index) : std::string("cpu"),
                     peak_precision(device.str(), amp));
    const std::string mfu = rate.mfu ? std::to_string(100.0 * *rate.mfu) : std::string("n/a");
    std::printf(
        "RESULT model=%s size=%lld batch=%lld accum=%lld amp=%s params=%lld graphs=%s images_per_s=%.1f "
        "ms_per_step=%.3f gflop_per_image=%.3f mfu_pct=%s\n",
        model.c_str(), static_cast<long long>(image_size), static_cast<long long>(batch),
        static_cast<long long>(accum), amp.c_str(), static_cast<long long>(params),
        gs.used ? "captured" : ("eager (" + gs.reason + ")").c_str(), images_per_second,
        1e3 * seconds / static_cast<double>(r.steps), rate.flops_per_image / 1e9, mfu.c_str());
    if (profile_steps > 0) {
      DeviceBatches profiled(batches, profile_steps * accum);
      set_profiler_range(device, true);
      trainer.train_epoch(profiled, 2);
      set_profiler_range(device, false);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "model_panel: %s\n", e.what());
    return 1;
  }
  return 0;
}
