// train's end of run: the utilization report (profiler, loader, DDP communication, CUDA graphs), the
// replicas' parameter checksums, and the summary lines rank 0 prints (DDP, table, AMP, files, "done").
#pragma once
#include "models/report/report.h"
#include "tools/train/epoch_loop.h"
#include "tools/train/flags.h"
#include "tools/train/run_setup.h"

namespace liftoff::tools {

// Assembles the report (an empty one with the graph status without --profile). A collective with DDP and
// --profile (every rank's step time is gathered on rank 0): every rank calls it.
RunReport collect_report(const Flags& f, TrainSetup& s);

// Every rank states a checksum of its parameters (identical lines mean identical replicas), then waits for
// the others. With DDP only.
void print_parameter_checksum(const TrainSetup& s);

// Rank 0's closing lines; writes --report and --trace.
void print_run_summary(const Flags& f, TrainSetup& s, const RunReport& report, const LoopResult& loop);

}  // namespace liftoff::tools
