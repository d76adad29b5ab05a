// The utilization report of a training run: what each stage cost per step, how busy the GPU and the host
// threads were, memory peaks, and a verdict (what holds the run back, with the numbers, and the one change
// most likely to help). Schema of the JSON form: docs/report-schema.md ("liftoff.report/1").
//
// The umbrella of models/report/ (tools and tests include this):
//   run_report.h   the report's data (RunConfig, StageReport, LoaderReport, GraphReport, Verdict, RunReport)
//   build.h        build_report: the pure function that assembles a RunReport from measured pieces
//   facts.h        the figures a verdict weighs, computed once from a report
//   rules.h        the verdict rules, a table of small named rules; diagnose() walks it
//   monitor.h      RunMonitor: Profiler + GpuSampler + CPU snapshots for a run, finish() -> RunReport
//   trace.h        write_trace: Chrome trace events
//   metrics_log.h  MetricsLog, MetricsWindow: --log metrics.jsonl
//   tensorboard.h  SummaryWriter: --tensorboard event files
//   compare.h      two runs side by side, as text and as an HTML page
//   format.h       format_bytes
// RunReport::to_json / from_json live in json.cpp (one field description for both directions, json.h),
// render_table in text.cpp.
#pragma once

#include "models/report/build.h"
#include "models/report/compare.h"
#include "models/report/facts.h"
#include "models/report/format.h"
#include "models/report/metrics_log.h"
#include "models/report/monitor.h"
#include "models/report/rules.h"
#include "models/report/run_report.h"
#include "models/report/tensorboard.h"
#include "models/report/trace.h"
