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
  std::string lr_scale =
      "none";  // linear | sqrt | none: --lr times (batch x accum x ranks / 256)^(1 | 1/2 | 0)
  double momentum = 0.9;
  bool nesterov = true;
  double wd = 5e-4;
  std::string schedule = "onecycle";
  int64_t warmup = 0;
  int64_t step_size = 0;
  double gamma = 0.1;
  double label_smoothing = 0.0;
  std::string augment = "auto";
  int workers = 0;   // 0: auto (default_workers), resolved when the flags are parsed
  int prefetch = 0;  // 0: 2 * workers
  bool pin_memory = true;
  int64_t image_size = 0;
  int64_t max_image_pixels = int64_t{1} << 26;  // 8192 x 8192
  int64_t decode_memory_mb = 2048;
  std::string on_bad_sample = "error";
  double max_bad_fraction = 0.01;  // --on-bad-sample skip: above this share of a folder's files, stop
  std::string decode = "auto";     // --data folder: auto | gpu | cpu | off
  std::string nvjpeg_backend = "auto";
  std::string cpu_decoder = "auto";
  int pad = 2;
  double random_erase = 0.0;
  bool no_eval = false;
  int64_t eval_every = 1;        // evaluate after every N-th epoch (and the last)
  double target_accuracy = 0.0;  // > 0: stop at the first evaluation reaching it (time to accuracy), 0..1
  double ema = -1.0;             // >= 0: the EMA decay (--ema [DECAY]); < 0: no EMA
  std::string ema_buffers = "copy";
  bool tta_flip = false;
  bool tta_shift = false;
  int64_t timing_warmup = 5;
  std::string amp = "off";
  std::string cuda_graphs = "auto";
  std::string concurrent_micro_batches = "auto";
  double loss_scale = 0.0;
  int gpus = 0;
  double bucket_mb = 25.0;
  std::string ddp_compress = "none";
  std::string report;
  std::string trace;
  std::string log;
  std::string tensorboard;  // directory for TensorBoard event files
  int64_t log_every = 50;
  bool profile = true;
  std::string checkpoint_dir;
  std::string save_every;
  int64_t keep = 3;
  std::string resume;
  std::string init_from;  // model weights to start from (safetensors, PyTorch names)
  std::string on_nan = "stop";
  bool deterministic = false;
  bool print_settings = false;  // print runtime/config's table of environment settings and exit
  bool print_config = false;    // print the flags as TOML (what --config reads) and exit

  // Not a flag: the run's flags as JSON ({"name": "value"}, flag_values()), stored in every checkpoint so
  // that
  // --resume, evaluate and predict know the run. Set by the tool after parsing.
  std::string stored_config;
};

// The DataLoader's ring holds at most this many batches.
constexpr int kMaxPrefetch = 256;

// Registers every flag on app, bound to f (PyTorch/timm spellings as aliases: --batch-size, --weight-decay,
// -j), --config FILE.toml and --print-config, the help layout, and check_flags as the app's final callback.
void add_flags(CLI::App& app, Flags& f);
// The flags' effective values as the JSON object Flags::stored_config holds.
std::string stored_config_json(const CLI::App& app);
// What no single flag's range can say, before the run starts: --save-every's form, --save-every / --keep
// without a checkpoint directory, output paths (--report, --trace, --log) writable now (the OS reason
// otherwise), --checkpoint-dir not a file. Throws CLI::ValidationError (a usage error, exit 2).
void check_flags(const CLI::App& app, const Flags& f);

// --prefetch, or its default 2 x --workers capped at kMaxPrefetch.
int effective_prefetch(const Flags& f);
// --workers 0 (the default): 4, or for a JPEG/PNG folder the workers decode for a CUDA run half the cores
// this process gets (its share among the machine's local_ranks), at least 4 and at most 8. Resolved by
// train's main once the flags (and a resumed run's stored ones) are final, before anything reads f.workers.
int default_workers(const Flags& f, int host_cores, int local_ranks, bool on_cuda);

// The reference batch of --lr-scale (Goyal et al. 2017: lr 0.1 for 256 images per step).
constexpr int64_t kLrScaleReferenceBatch = 256;
// --lr (or the optimizer's default) scaled by --lr-scale for `images_per_step` (batch x accum x ranks).
double effective_lr(const Flags& f, int64_t images_per_step);
// "0.2 x 512/256 (--lr-scale linear)" when scaled, "" otherwise: how effective_lr was reached.
std::string lr_scale_note(const Flags& f, int64_t images_per_step);

// --save-every: "N" optimizer steps, "Ne" epochs; "" / "0": only at the end and on signals (both 0).
struct SaveEvery {
  int64_t steps = 0;
  int64_t epochs = 0;
};
SaveEvery parse_save_every(const std::string& every);

}  // namespace liftoff::tools
