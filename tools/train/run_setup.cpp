#include "tools/train/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "models/nn/zoo.h"
#include "ops/common/layout.h"
#include "runtime/parallel.h"
#include "tools/train/format.h"

namespace liftoff::tools {

namespace {

Placement place(const Flags& f) {
  Placement p;
  p.env = distributed::discover_env();
  if (!p.env.distributed()) {
    p.choice = resolve_device(f.device);
    return p;
  }
  // One GPU per rank (cuda:local_rank) unless the CPU was asked for (MPI backend).
  if (f.device == "cpu") {
    p.choice = {Device::cpu(), "cpu: rank " + std::to_string(p.env.rank)};
  } else {
    p.choice = resolve_device("cuda:" + std::to_string(p.env.local_rank));
  }
  return p;
}

// Placement, CPU threads, current device and process group.
void place_process(const Flags& f, TrainSetup& s) {
  s.placement = place(f);
  // The ranks on one machine share its cores: by default each takes its share, never all of them.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.threads = f.threads > 0 ? f.threads : std::max(1, cores / s.placement.env.local_world_size);
  set_num_threads(s.threads);
  s.device = s.placement.choice.device;
  use_device(s.device);  // a rank on cuda:N makes it current, so nothing lands on cuda:0 by default
  s.rank0 = s.placement.env.rank == 0;
  if (s.placement.env.distributed()) {
    distributed::ProcessGroupOptions go;
    if (s.device.is_cuda()) go.cuda_device = s.device.index;
    s.group = distributed::make_process_group(distributed::backend_for(s.device), s.placement.env.rank,
                                              s.placement.env.world_size, go);
  }
}

// Model (+ DDP), optimizer and learning-rate schedule.
void build_model(const Flags& f, TrainSetup& s) {
  s.model = make_model(f.model, s.data.channels, s.data.classes, s.data.height, f.seed);
  s.model->to(s.device);
  if (s.group) {
    DDPOptions dopts;
    dopts.bucket_cap_mb = f.bucket_mb;
    dopts.bf16_compress = f.ddp_compress == "bf16";
    s.ddp =
        std::make_unique<DistributedDataParallel>(*s.model, *s.group, dopts);  // broadcasts rank 0's weights
  }
  s.lr = effective_lr(f, f.batch * f.accum * s.placement.env.world_size);
  if (f.optimizer == "sgd") {
    s.optimizer =
        std::make_unique<SGD>(s.model->parameters(), s.lr, f.momentum, f.wd, f.nesterov && f.momentum > 0);
  } else {
    s.optimizer = std::make_unique<AdamW>(s.model->parameters(), s.lr, 0.9, 0.999, 1e-8, f.wd);
  }
  if (f.ema >= 0) {
    // After DDP's broadcast: every rank starts its average from rank 0's weights.
    s.ema = std::make_unique<ModelEma>(*s.model, EmaOptions{f.ema, f.ema_buffers == "average"});
  }
  s.micro_per_epoch = s.train_batches().batches_per_epoch();
  const int64_t steps_per_epoch = (s.micro_per_epoch + f.accum - 1) / f.accum;
  int64_t total_steps = steps_per_epoch * f.epochs;
  if (f.max_steps >= 0) total_steps = std::min(total_steps, std::max<int64_t>(f.max_steps, 1));
  ScheduleOptions schedule_opts;
  schedule_opts.step_size = f.step_size > 0 ? f.step_size : steps_per_epoch;
  schedule_opts.gamma = f.gamma;
  s.schedule = make_schedule(f.schedule, s.lr, total_steps, f.warmup, schedule_opts);
}

// The runtime's layout choice for conv activations (ops/common/layout.h): channels-last on CUDA (every
// training dtype: f32, bf16, f16), unless LIFTOFF_CONV_LAYOUT=input keeps the model's NCHW input.
const char* activation_layout(const Flags& f, Device device) {
  (void)f;
  return device.is_cuda() && !conv_layout_follows_input() ? "channels_last" : "contiguous";
}

RunConfig make_run_config(const Flags& f, const TrainSetup& s) {
  RunConfig rc;
  rc.device = s.device.str();
  rc.model = f.model;
  rc.data = f.data;
  rc.batch = f.batch;
  rc.accum = f.accum;
  rc.amp = f.amp;
  rc.augment = s.data.augment;
  rc.workers = f.workers;
  rc.prefetch = effective_prefetch(f);
  rc.pin_memory = f.pin_memory;
  rc.threads = s.threads;
  rc.world_size = s.placement.env.world_size;
  if (s.group) rc.ddp_compress = f.ddp_compress;
  rc.cuda_available = cuda_unavailable_reason(0).empty();
  if (s.device.is_cuda()) rc.device_name = cuda_device_name(s.device.index);
  rc.activation_layout = activation_layout(f, s.device);
  rc.decode = s.data.decode_where;
  rc.jpeg = s.data.jpeg;
  return rc;
}

// Run monitor (profiler + samplers) and the trainer.
void build_trainer(const Flags& f, TrainSetup& s) {
  s.run_config = make_run_config(f, s);
  ProfilerOptions po;
  po.warmup_steps = f.timing_warmup;
  po.keep_trace = !f.trace.empty();
  if (s.ddp) po.on_warmup_end = [&s] { s.ddp_at_warmup = s.ddp->stats(); };
  s.monitor = std::make_unique<RunMonitor>(s.run_config, s.device, po);
  if (s.data.train_stats) s.monitor->watch_loader(s.data.train_stats);

  TrainerOptions trainer_opts;
  trainer_opts.accum = f.accum;
  trainer_opts.label_smoothing = f.label_smoothing;
  trainer_opts.max_steps = f.max_steps;
  trainer_opts.amp = parse_amp(f.amp);
  trainer_opts.loss_scale = f.loss_scale;
  trainer_opts.ddp = s.ddp.get();
  trainer_opts.group = s.group.get();
  trainer_opts.profiler = f.profile ? &s.monitor->profiler() : nullptr;
  trainer_opts.skip_nonfinite_steps = f.on_nan == "skip";
  trainer_opts.cuda_graphs = parse_graph_mode(f.cuda_graphs);
  trainer_opts.concurrent_micro_batches = parse_branch_mode(f.concurrent_micro_batches);
  trainer_opts.ema = s.ema.get();
  s.trainer = std::make_unique<Trainer>(*s.model, *s.optimizer, s.schedule.get(), trainer_opts);
}

}  // namespace

std::unique_ptr<TrainSetup> make_train_setup(const Flags& f) {
  auto s = std::make_unique<TrainSetup>();
  place_process(f, *s);
  s->data = make_train_data(f, s->device, s->placement.env.rank, s->placement.env.world_size);
  build_model(f, *s);
  build_trainer(f, *s);
  return s;
}

void print_run_header(const Flags& f, const TrainSetup& s, const ResumePoint& resume) {
  const int world = s.placement.env.world_size;
  std::printf("liftoff train | device %s (%s) | %d CPU threads\n", s.device.str().c_str(),
              s.placement.choice.why.c_str(), s.threads);
  if (s.group) {
    std::printf("  DDP: world size %d (%s), one process per %s, launched by %s, buckets %.0f MB%s\n", world,
                s.group->describe().c_str(), s.device.is_cuda() ? "GPU" : "CPU",
                s.placement.env.launcher.c_str(), f.bucket_mb,
                f.ddp_compress == "bf16" ? ", f32 buckets all-reduced as bf16" : "");
  }
  std::printf("  model %s (%s parameters) | data %s: %lld train / %lld test images %lldx%lldx%lld\n",
              f.model.c_str(), with_commas(s.model->num_parameters()).c_str(), f.data.c_str(),
              static_cast<long long>(s.data.train_size), static_cast<long long>(s.data.test_size),
              static_cast<long long>(s.data.channels), static_cast<long long>(s.data.height),
              static_cast<long long>(s.data.width));
  if (s.data.skips && !s.data.skips->load_line().empty())
    std::printf("  %s\n", s.data.skips->load_line().c_str());
  const std::string lr_note = lr_scale_note(f, f.batch * f.accum * world);
  std::printf(
      "  batch %lld x accum %lld%s = %lld per step | %s lr %g (%s%s%s) | wd %g | amp %s | activations "
      "%s\n",
      static_cast<long long>(f.batch), static_cast<long long>(f.accum),
      s.group ? (" x " + std::to_string(world) + " ranks").c_str() : "",
      static_cast<long long>(f.batch * f.accum * world), f.optimizer.c_str(), s.lr,
      lr_note.empty() ? "" : (lr_note + "; ").c_str(), f.schedule.c_str(),
      f.warmup > 0 ? (", warm-up " + std::to_string(f.warmup)).c_str() : "", f.wd, f.amp.c_str(),
      activation_layout(f, s.device));
  std::vector<std::string> evaluation;
  if (s.ema) {
    evaluation.push_back(str_cat("EMA of the weights (decay ", f.ema, ", batch-norm statistics ",
                                 f.ema_buffers == "average" ? "averaged" : "the model's",
                                 ", updated in the step)"));
  }
  if (f.tta_flip) evaluation.push_back("flip averaging (image + mirror)");
  if (f.tta_shift)
    evaluation.push_back("shift averaging (image 1/2, one pixel down-right and up-left 1/4 each)");
  if (f.eval_every > 1 && !f.no_eval) {
    evaluation.push_back(str_cat("after every ", f.eval_every, " epochs and the last"));
  }
  if (!evaluation.empty()) {
    std::string text;
    for (const std::string& part : evaluation) text += (text.empty() ? " " : "; ") + part;
    std::printf("  evaluation:%s\n", text.c_str());
  }
  if (s.schedule && !s.schedule->note().empty()) std::printf("  note: %s\n", s.schedule->note().c_str());
  if (s.device.is_cuda()) {
    std::printf("  CUDA graphs: %s%s%s\n", f.cuda_graphs.c_str(),
                f.cuda_graphs == "off" ? "" : " (the step is captured after 3 eager steps when it can be)",
                f.cuda_graphs != "off" && f.accum > 1
                    ? ("; its micro-batches on concurrent streams: " + f.concurrent_micro_batches).c_str()
                    : "");
  }
  std::printf("  loader: %d workers, prefetch %d, %s memory, augment %s\n", f.workers, s.run_config.prefetch,
              !s.device.is_cuda() ? "host"
              : f.pin_memory      ? "pinned"
                                  : "pageable",
              s.run_config.augment.c_str());
  if (!s.data.decode.empty()) std::printf("  decode %s\n", s.data.decode.c_str());
  if (!resume.path.empty()) {
    std::printf("  resumed from %s (epoch %lld, step %lld, %lld micro-batches into the epoch)\n",
                resume.path.c_str(), static_cast<long long>(resume.epoch + 1),
                static_cast<long long>(resume.step), static_cast<long long>(resume.skip_micro_batches));
  }
  std::fflush(stdout);
}

}  // namespace liftoff::tools
