// train's setup: where this process runs (rank, device, threads), and everything it builds before the first
// step (process group, data, model, DDP, optimizer, schedule, monitor, trainer), plus the run's header.
#pragma once
#include <cstdint>
#include <memory>

#include "models/nn/module.h"
#include "models/report/report.h"
#include "models/train/ddp.h"
#include "models/train/ema.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "models/train/trainer.h"
#include "runtime/device_select.h"
#include "runtime/distributed/env.h"
#include "runtime/distributed/process_group.h"
#include "tools/train/checkpointing.h"
#include "tools/train/data_setup.h"
#include "tools/train/flags.h"

namespace liftoff::tools {

// Rank and device of this process: single process, `train --gpus N` children, or mpirun / RANK env ranks.
struct Placement {
  distributed::DistEnv env;
  DeviceChoice choice;
};

// Members in construction order, so they are destroyed in reverse: the trainer (which may own a graph with
// captured collectives) before the process group. Not movable: the profiler's warm-up hook points into it.
struct TrainSetup {
  Placement placement;
  Device device;
  int threads = 1;
  bool rank0 = true;
  std::unique_ptr<distributed::ProcessGroup> group;
  TrainData data;
  std::unique_ptr<Module> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  double lr = 0.0;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ModelEma> ema;  // --ema
  int64_t micro_per_epoch = 0;    // micro-batches of the training loader per epoch
  std::unique_ptr<LRSchedule> schedule;
  RunConfig run_config;
  // DDP totals at the end of the profiler's warm-up: the report's communication figures cover the measured
  // steps, like every other stage.
  DDPStats ddp_at_warmup;
  std::unique_ptr<RunMonitor> monitor;
  std::unique_ptr<Trainer> trainer;

  TrainSetup() = default;
  TrainSetup(const TrainSetup&) = delete;
  TrainSetup& operator=(const TrainSetup&) = delete;

  BatchSource& train_batches() { return *data.train; }
  BatchSource& test_batches() { return *data.test; }
};

// Builds everything the flags ask for, in order: placement and threads, process group, data, model (+ DDP
// broadcast of rank 0's weights), optimizer, schedule, run monitor, trainer.
std::unique_ptr<TrainSetup> make_train_setup(const Flags& f);

// The lines rank 0 prints before training: device, DDP, model and data, batch and optimizer, CUDA graphs,
// loader, resume point.
void print_run_header(const Flags& f, const TrainSetup& s, const ResumePoint& resume);

}  // namespace liftoff::tools
