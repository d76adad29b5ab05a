#include "tools/train/flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/nn/zoo.h"
#include "runtime/platform/files.h"
#include "tools/common/cli.h"

namespace liftoff::tools {

namespace {

// An unsigned flag parses "-1" as 2^64-1 without a word: refuse a sign.
const CLI::Validator kUnsigned(
    [](std::string& text) {
      const bool digits =
          !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
      return digits ? std::string() : "'" + text + "' is not an integer in [0, 2^64-1]";
    },
    "UINT64");

// Where a run writes a file at its end, it is checked before the run starts (the OS reason included).
void check_output(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::string problem = platform::writable_file_problem(path);
  if (!problem.empty())
    throw CLI::ValidationError(flag,
                               "cannot write '" + path + "': " + problem + "; pass a writable file path");
}

}  // namespace

std::string stored_config_json(const CLI::App& app) {
  nlohmann::json j = nlohmann::json::object();
  // Where the checkpoints go is not part of the run: a resumed run saves where it resumed from, and two
  // directories holding the same training hold the same bytes.
  for (const auto& [name, value] : flag_values(app)) {
    if (name != "checkpoint-dir") j[name] = value;
  }
  return j.dump();
}

int default_workers(const Flags& f, int host_cores, int local_ranks, bool on_cuda) {
  constexpr int kWorkers = 4;
  // On the CPU the model's threads need the cores, and a CPU model asks for few images a second.
  if (!on_cuda || f.data != "folder" || f.decode == "off" || f.decode == "gpu") return kWorkers;
  // Decoding is the loader's heaviest work: 4 workers decoding 224-px JPEGs for ResNet-50 on an H100 host
  // kept it at 87% of its speed on on-GPU data, 8 at 98.6%.
  const int cores = host_cores / std::max(1, local_ranks);
  return std::clamp(cores / 2, kWorkers, 8);
}

int effective_prefetch(const Flags& f) {
  return f.prefetch > 0 ? f.prefetch : std::min(2 * f.workers, kMaxPrefetch);
}

double effective_lr(const Flags& f, int64_t images_per_step) {
  const double base = f.lr > 0 ? f.lr : (f.optimizer == "sgd" ? 0.1 : 1e-3);
  const double ratio = static_cast<double>(images_per_step) / static_cast<double>(kLrScaleReferenceBatch);
  if (f.lr_scale == "linear") return base * ratio;
  if (f.lr_scale == "sqrt") return base * std::sqrt(ratio);
  return base;
}

std::string lr_scale_note(const Flags& f, int64_t images_per_step) {
  if (f.lr_scale == "none") return "";
  const double base = f.lr > 0 ? f.lr : (f.optimizer == "sgd" ? 0.1 : 1e-3);
  char text[160];
  std::snprintf(text, sizeof text, "%g x %s%lld/%lld%s by --lr-scale %s", base,
                f.lr_scale == "sqrt" ? "sqrt(" : "", static_cast<long long>(images_per_step),
                static_cast<long long>(kLrScaleReferenceBatch), f.lr_scale == "sqrt" ? ")" : "",
                f.lr_scale.c_str());
  return text;
}

SaveEvery parse_save_every(const std::string& every) {
  SaveEvery out;
  if (every.empty() || every == "0") return out;
  const bool epochs = every.back() == 'e';
  const std::string digits = epochs ? every.substr(0, every.size() - 1) : every;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(digits.c_str(), &end, 10);
  if (digits.empty() || digits[0] == '-' || *end != '\0' || n <= 0 || errno == ERANGE) {
    throw CLI::ValidationError("--save-every",
                               "'" + every + "': expected N optimizer steps or Ne epochs (e.g. 500 or 1e)");
  }
  (epochs ? out.epochs : out.steps) = n;
  return out;
}

void check_flags(const CLI::App& app, const Flags& f) {
  parse_save_every(f.save_every);
  const bool saving = !f.checkpoint_dir.empty() || !f.resume.empty();
  // Given with another value than its default (a --config file from --print-config lists the defaults too).
  const auto set = [&app](const std::string& name) {
    const CLI::Option* opt = app.get_option(name);
    if (opt->count() == 0) return false;
    const auto results = opt->reduced_results();
    return results.empty() || !same_flag_value(results.front(), opt->get_default_str());
  };
  if (!saving && (set("--save-every") || set("--keep"))) {
    throw CLI::ValidationError(set("--save-every") ? "--save-every" : "--keep",
                               "needs --checkpoint-dir (where to save); without it no checkpoint is written");
  }
  std::error_code ec;
  if (!f.checkpoint_dir.empty() && std::filesystem::exists(f.checkpoint_dir, ec) &&
      !std::filesystem::is_directory(f.checkpoint_dir, ec)) {
    throw CLI::ValidationError("--checkpoint-dir",
                               "'" + f.checkpoint_dir + "' exists and is not a directory");
  }
  check_output("--report", f.report);
  check_output("--trace", f.trace);
  check_output("--log", f.log);
  // --tensorboard's directory is made now, as PyTorch's SummaryWriter does: a bad path fails before any work.
  if (!f.tensorboard.empty()) {
    std::filesystem::create_directories(f.tensorboard, ec);
    std::error_code is_dir_ec;
    if (!std::filesystem::is_directory(f.tensorboard, is_dir_ec)) {
      throw CLI::ValidationError("--tensorboard", "cannot make the directory '" + f.tensorboard + "'" +
                                                      (ec ? ": " + ec.message() : ": a file is in the way"));
    }
  }
}

void add_flags(CLI::App& app, Flags& f) {
  // As argparse does: a flag given twice takes the last value (a --config file's values come before them).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(34);
  app.formatter(formatter);
  const std::string g_dev = "Device";
  app.add_option("--device", f.device, "auto | cpu | cuda | cuda:N (auto: CUDA when usable, else the CPU)")
      ->capture_default_str()
      ->group(g_dev);
  app.add_option("--threads", f.threads,
                 "CPU threads for the CPU backend (0: all cores, shared out among the ranks on this machine)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1024}))
      ->group(g_dev);

  const std::string g_data = "Model and data";
  // The zoo's own list (make_model): a new model shows here, an unknown name stops before any data is read.
  app.add_option(
         "--model", f.model,
         "the zoo's model (strided_cnn: light, for large images; resnet9: Page's few wide layers, fast to "
         "high accuracy on small images; resnet18, resnet50, mobilenet_v2, "
         "vit_tiny: CIFAR-style stems below 64 px, torchvision's above; vgg11: plain convolutions with a "
         "bias and a ReLU, no batch norm, images of 16 px or more)")
      ->capture_default_str()
      ->check(CLI::IsMember(model_names()))
      ->group(g_data);
  app.add_option("--data", f.data, "fashion-mnist | mnist | cifar10 | folder | synthetic")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "folder", "synthetic"}))
      ->group(g_data);
  app.add_option(
         "--data-dir", f.data_dir,
         "data folder: IDX .gz files (fashion-mnist default /usr/share/datasets/fashion-mnist), CIFAR-10 "
         "binary batches, or for folder DIR/train/<class>/* and DIR/test/<class>/*")
      ->group(g_data);
  app.add_option(
         "--image-size", f.image_size,
         "--data folder: the model input's side (0: 224 with --decode gpu|cpu, the first image's with "
         "--decode off)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{16384}))
      ->group(g_data);
  app.add_option("--max-image-pixels", f.max_image_pixels,
                 "--data folder: refuse images with more pixels (width x height) than this")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{1} << 28))
      ->group(g_data);
  app.add_option("--decode-memory-mb", f.decode_memory_mb,
                 "--data folder: host memory the workers may use for images being decoded at once (a worker "
                 "waits for room; an image needing more alone is refused)")
      ->capture_default_str()
      ->check(in_range(int64_t{16}, int64_t{1} << 20))
      ->group(g_data);
  app.add_option("--on-bad-sample", f.on_bad_sample,
                 "--data folder: error | skip. skip checks every file's header and structure at load time "
                 "and leaves out the bad ones (listed with the reason in the output, --report and --log)")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "skip"}))
      ->group(g_data);
  app.add_option("--max-bad-fraction", f.max_bad_fraction,
                 "--on-bad-sample skip: stop (exit 1) when more than this share of a folder's files is bad")
      ->capture_default_str()
      ->check(in_range(0.0, 1.0))
      ->group(g_data);
  app.add_option(
         "--decode", f.decode,
         "--data folder: auto | gpu | cpu | off. gpu: batched nvJPEG into device memory (hardware JPEG "
         "decoder where present); cpu: the workers (libjpeg-turbo / stb_image); both then run "
         "ImageNet-style augmentation (random resized crop, flip; eval: resize + centre crop) in one "
         "kernel. auto: on CUDA with nvJPEG a hybrid: per batch the CPU workers take the share they sustain "
         "without making the step wait, nvJPEG the rest (with --deterministic one fixed route: cpu, or gpu "
         "with 1 worker); else cpu. off: every image resized to --image-size, then --augment's pad-crop")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gpu", "cpu", "off"}))
      ->group(g_data);
  app.add_option(
         "--nvjpeg-backend", f.nvjpeg_backend,
         "--decode gpu: auto (hardware where present, else gpu-hybrid) | hardware | gpu-hybrid | hybrid")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "hardware", "gpu-hybrid", "hybrid"}))
      ->group(g_data);
  app.add_option("--cpu-decoder", f.cpu_decoder,
                 "JPEG decoder of the CPU path: auto (libjpeg-turbo) | turbo | stb")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "turbo", "stb"}))
      ->group(g_data);
  app.add_option("--synthetic-size", f.synthetic_size, "training images of --data synthetic")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{10000000}))
      ->group(g_data);
  app.add_option(
         "--augment", f.augment,
         "auto | gpu | cpu | none: random crop (--pad) + flip + normalise on the GPU or by the CPU workers "
         "(auto: gpu on CUDA)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gpu", "cpu", "none"}))
      ->group(g_data);
  app.add_option(
         "-j,--workers", f.workers,
         "loader threads that gather/decode (and augment with --augment cpu); 0: 4, or for a --data "
         "folder the workers decode (--decode auto|cpu) on CUDA half the cores, 4 to 8 (a rank's share)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{256}))
      ->group(g_data);
  app.add_option("--prefetch", f.prefetch,
                 "batches in flight in the loader's pinned ring (0: 2 x workers, at most 256)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{kMaxPrefetch}))
      ->group(g_data);
  app.add_flag("--pin-memory,!--no-pin-memory", f.pin_memory,
               "page-locked host buffers for asynchronous H2D copies (default on)")
      ->default_str(f.pin_memory ? "true" : "false")
      ->group(g_data);
  app.add_option("--pad", f.pad, "zero padding of the random crop, in pixels")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{64}))
      ->group(g_data);
  app.add_option("--random-erase", f.random_erase, "random erasing probability")
      ->capture_default_str()
      ->check(in_range(0.0, 1.0))
      ->group(g_data);

  const std::string g_train = "Training";
  app.add_option("--epochs", f.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{100000}))
      ->group(g_train);
  app.add_option("--batch,--batch-size", f.batch, "micro-batch size (images per forward/backward)")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{1} << 20))
      ->group(g_train);
  app.add_option("--accum", f.accum,
                 "micro-batches accumulated per optimizer step (effective batch = batch * accum)")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{4096}))
      ->group(g_train);
  app.add_option("--max-steps", f.max_steps, "stop after this many optimizer steps (-1: run all epochs)")
      ->capture_default_str()
      ->check(in_range(int64_t{-1}, int64_t{1} << 40))
      ->group(g_train);
  app.add_flag("--drop-last,!--no-drop-last", f.drop_last,
               "leave out each epoch's last, smaller training batch (default on; evaluation never drops; "
               "--no-drop-last trains on it, its shape prepared during the warm-up)")
      ->group(g_train);
  app.add_option("--seed", f.seed, "seed of the weights, the shuffle and the augmentation (0 .. 2^64-1)")
      ->capture_default_str()
      ->check(kUnsigned)
      ->group(g_train);
  app.add_option("--label-smoothing", f.label_smoothing, "cross-entropy label smoothing")
      ->capture_default_str()
      ->check(in_range(0.0, 0.999))
      ->group(g_train);
  app.add_flag("--no-eval", f.no_eval, "skip the test-set evaluation after each epoch")
      ->default_str("false")
      ->group(g_train);
  app.add_option(
         "--eval-every", f.eval_every,
         "evaluate after every N-th epoch and after the last (PyTorch Lightning's "
         "check_val_every_n_epoch); --target-accuracy then stops at the first evaluated epoch reaching it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->group(g_train);
  app.add_option(
         "--target-accuracy", f.target_accuracy,
         "stop at the first epoch whose test accuracy reaches this (0..1, or a percentage: 94 = 0.94) "
         "and print the time to it: wall time from the first step (data loading and evaluation "
         "included) and training time alone")
      ->check(in_range(0.0, 100.0))
      ->excludes("--no-eval")
      ->group(g_train);
  app.add_option("--ema", f.ema,
                 "[DECAY] keep an exponential moving average of the weights (ema = DECAY * ema + (1 - DECAY) "
                 "* w after each optimizer step, on the device) and evaluate it; checkpointed")
      ->expected(0, 1)
      ->default_str("0.999")
      ->check(in_range(0.0, 0.999999))
      ->group(g_train);
  app.add_option("--ema-buffers", f.ema_buffers,
                 "--ema: copy (the model's batch-norm statistics) | average (averaged like the weights)")
      ->capture_default_str()
      ->check(CLI::IsMember({"copy", "average"}))
      ->needs("--ema")
      ->group(g_train);
  app.add_flag("--tta-flip", f.tta_flip,
               "evaluate each test image and its horizontal mirror and average the logits")
      ->group(g_train);
  app.add_flag(
         "--tta-shift", f.tta_shift,
         "evaluate each test image also moved one pixel down-right and up-left (edges replicated), "
         "weighing the shifted views 1/4 each and the image 1/2 (each with its mirror under --tta-flip)")
      ->group(g_train);
  app.add_option("--timing-warmup", f.timing_warmup,
                 "optimizer steps left out of the steady-state images/s (start-up, algorithm search)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1000000}))
      ->group(g_train);

  const std::string g_opt = "Optimizer and schedule";
  app.add_option("--optimizer", f.optimizer, "sgd | adamw")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->group(g_opt);
  app.add_option("--lr", f.lr, "peak learning rate (default: 0.1 for sgd, 0.001 for adamw)")
      ->check(positive())
      ->group(g_opt);
  app.add_option("--lr-scale", f.lr_scale,
                 "linear | sqrt | none: scale --lr by (batch x accum x ranks / 256), or its square root "
                 "(Goyal et al.); the header prints the learning rate used")
      ->capture_default_str()
      ->check(CLI::IsMember({"linear", "sqrt", "none"}))
      ->group(g_opt);
  app.add_option("--momentum", f.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(in_range(0.0, 0.999999))
      ->group(g_opt);
  app.add_flag("--nesterov,!--no-nesterov", f.nesterov, "Nesterov momentum for SGD (default on)")
      ->default_str(f.nesterov ? "true" : "false")
      ->group(g_opt);
  app.add_option("--wd,--weight-decay", f.wd, "weight decay (L2 for sgd, decoupled for adamw)")
      ->capture_default_str()
      ->check(in_range(0.0, 1.0))
      ->group(g_opt);
  app.add_option("--schedule", f.schedule, "constant | step | cosine | onecycle")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "step", "cosine", "onecycle"}))
      ->group(g_opt);
  app.add_option("--warmup", f.warmup, "linear warm-up, in optimizer steps")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1} << 40))
      ->group(g_opt);
  app.add_option("--step-size", f.step_size, "--schedule step: optimizer steps between decays (0: one epoch)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1} << 40))
      ->group(g_opt);
  app.add_option("--gamma", f.gamma, "--schedule step: decay factor")
      ->capture_default_str()
      ->check(in_range(0.0, 1.0))
      ->group(g_opt);

  const std::string g_perf = "Precision and parallelism";
  app.add_option("--amp", f.amp,
                 "off | bf16 | fp16: mixed precision (conv/linear in half, f32 master weights)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "bf16", "fp16"}))
      ->group(g_perf);
  app.add_option("--cuda-graphs", f.cuda_graphs,
                 "auto | on | off: capture the whole training step once (after 3 eager steps) and replay it "
                 "as one CUDA graph; auto falls back to eager steps, with the reason in the report, when the "
                 "step cannot be captured (CPU, host reads or host random draws in the model)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->group(g_perf);
  app.add_option("--concurrent-micro-batches", f.concurrent_micro_batches,
                 "auto | on | off: with --accum > 1 and a captured step, run its micro-batches on concurrent "
                 "streams (same results; small batches then fill the GPU); auto checks the extra activation "
                 "memory fits and falls back to one stream")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->group(g_perf);
  app.add_option("--loss-scale", f.loss_scale, "--amp fp16: a static loss scale (0: dynamic, from 2^16)")
      ->capture_default_str()
      ->check(in_range(0.0, 1e30))
      ->group(g_perf);
  app.add_option("--gpus", f.gpus, "data-parallel over N local GPUs: one process per GPU, NCCL all-reduce")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1024}))
      ->group(g_perf);
  app.add_option("--bucket-mb", f.bucket_mb, "DDP gradient bucket size in MB")
      ->capture_default_str()
      ->check(in_range(0.001, 4096.0))
      ->group(g_perf);
  app.add_option(
         "--ddp-compress", f.ddp_compress,
         "none | bf16: DDP all-reduces f32 gradient buckets as bf16 copies (half the bytes; PyTorch's "
         "bf16_compress_hook)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "bf16"}))
      ->group(g_perf);

  const std::string g_out = "Report and logs";
  app.add_option("--report", f.report, "write the utilization report as JSON (schema liftoff.report/1)")
      ->group(g_out);
  app.add_option("--trace", f.trace, "write a Chrome trace (Perfetto / chrome://tracing) of the stages")
      ->group(g_out);
  app.add_option(
         "--log", f.log,
         "write metrics as JSON lines: per --log-every window loss, images/s, step ms; each evaluation")
      ->group(g_out);
  app.add_option("--tensorboard", f.tensorboard,
                 "write TensorBoard scalars (train/*, test/*, gpu/*, memory/*) to this directory every "
                 "--log-every steps and at each evaluation (tensorboard --logdir DIR)")
      ->group(g_out);
  app.add_flag("--profile,!--no-profile", f.profile,
               "stage timing, GPU/CPU sampling and the end-of-run utilization report (default on)")
      ->default_str(f.profile ? "true" : "false")
      ->group(g_out);
  app.add_option(
         "--log-every", f.log_every,
         "optimizer steps between --log / --tensorboard records (each reads the loss: one device sync)")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{1} << 40))
      ->group(g_out);

  const std::string g_ckpt = "Checkpoints and faults";
  app.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "write checkpoints (safetensors) here; written atomically, the last --keep kept")
      ->group(g_ckpt);
  app.add_option("--save-every", f.save_every,
                 "N optimizer steps or Ne epochs (default: at the end and on signals)")
      ->group(g_ckpt);
  app.add_option("--keep", f.keep, "checkpoints kept (0: all)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1000000}))
      ->group(g_ckpt);
  app.add_option(
         "--resume", f.resume,
         "continue from a checkpoint file, or the latest valid one in a folder, with the flags it stores "
         "(flags given again override them where safe: more --epochs or --max-steps, outputs)")
      ->configurable(false)
      ->group(g_ckpt);
  app.add_option(
         "--init-from", f.init_from,
         "start from these model weights (fine-tuning): a safetensors state_dict with PyTorch's names "
         "(safetensors.torch.save_file(model.state_dict(), F)) or a train checkpoint; optimizer and "
         "schedule start fresh")
      ->configurable(false)
      ->excludes("--resume")
      ->group(g_ckpt);
  app.add_flag(
         "--deterministic", f.deterministic,
         "reproducible algorithms only (cuDNN), so a stopped and resumed run ends with the same weights")
      ->default_str("false")
      ->group(g_ckpt);
  app.add_option(
         "--on-nan", f.on_nan,
         "stop | skip: a non-finite loss stops the run (the last good checkpoint stays); skip drops steps "
         "whose gradients are not finite, decided on the device")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "skip"}))
      ->group(g_ckpt);

  app.add_flag("--print-settings", f.print_settings,
               "print the LIFTOFF_* environment settings (value, source, default, accepted values) and exit")
      ->configurable(false)
      ->group(g_out);
  app.set_config("--config", "",
                 "read flags from a TOML file (name = value lines, e.g. from --print-config); flags on the "
                 "command line override it")
      ->group(g_out);
  app.add_flag("--print-config", f.print_config,
               "print the run's flags (these and the defaults) as a TOML file for --config, and exit")
      ->configurable(false)
      ->group(g_out);

  // Cross-flag checks and output paths, after every value is parsed and before anything runs.
  app.final_callback([&app, &f] {
    check_flags(app, f);
    if (f.target_accuracy > 1.0) f.target_accuracy /= 100.0;  // a percentage
  });
}

}  // namespace liftoff::tools
