// The flags of `train`, grouped as --help shows them, with their defaults.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace liftoff::tools {

struct Flags {
  std::string device = "auto";
  int threads = 0;
  std::string model = "resnet20";
  std::string data = "fashion-mnist";
  std::string data_dir;
  int64_t synthetic_size = 10000;
  int64_t epochs = 3;
  int64_t batch = 128;
  int64_t accum = 1;
  int64_t max_steps = -1;
  bool drop_last = true;  // training: an epoch's last, smaller batch is left out (evaluation never drops)
  uint64_t seed = 0;
  std::string optimizer = "sgd";
  double lr = -1.0;
  double momentum = 0.9;
  bool nesterov = true;
  double wd = 5e-4;
  std::string schedule = "onecycle";
  int64_t warmup = 0;
  int64_t step_size = 0;
  double gamma = 0.1;
  double label_smoothing = 0.0;
  std::string augment = "auto";
  int workers = 4;
  int prefetch = 0;  // 0: 2 * workers
  bool pin_memory = true;
  int64_t image_size = 0;
  int64_t max_image_pixels = int64_t{1} << 26;  // 8192 x 8192
  int64_t decode_memory_mb = 2048;
  std::string on_bad_sample = "error";
  std::string decode = "auto";  // --data folder: auto | gpu | cpu | off
  std::string nvjpeg_backend = "auto";
  std::string cpu_decoder = "auto";
  int pad = 2;
  double random_erase = 0.0;
  bool no_eval = false;
  double target_accuracy = 0.0;  // > 0: stop at the first evaluation reaching it (time to accuracy)
  int64_t timing_warmup = 5;
  std::string amp = "off";
  std::string cuda_graphs = "auto";
  std::string concurrent_micro_batches = "auto";
  double loss_scale = 0.0;
  int gpus = 0;
  double bucket_mb = 25.0;
  std::string report;
  std::string trace;
  std::string log;
  int64_t log_every = 50;
  bool profile = true;
  std::string checkpoint_dir;
  std::string save_every;
  int64_t keep = 3;
  std::string resume;
  std::string on_nan = "stop";
  bool deterministic = false;
  bool print_settings = false;  // print runtime/config's table of environment settings and exit
};

// The DataLoader's ring holds at most this many batches.
constexpr int kMaxPrefetch = 256;

// Registers every flag on app, bound to f, and check_flags as the app's final callback.
void add_flags(CLI::App& app, Flags& f);
// What no single flag's range can say, before the run starts: --save-every's form, --save-every / --keep
// without a checkpoint directory, output paths (--report, --trace, --log) writable now (the OS reason
// otherwise), --checkpoint-dir not a file. Throws CLI::ValidationError (a usage error, exit 2).
void check_flags(const CLI::App& app, const Flags& f);

// --prefetch, or its default 2 x --workers capped at kMaxPrefetch.
int effective_prefetch(const Flags& f);

// --save-every: "N" optimizer steps, "Ne" epochs; "" / "0": only at the end and on signals (both 0).
struct SaveEvery {
  int64_t steps = 0;
  int64_t epochs = 0;
};
SaveEvery parse_save_every(const std::string& every);

}  // namespace liftoff::tools
