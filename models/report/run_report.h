// The data of a run's utilization report: what the run was asked to do (RunConfig), what each stage cost per
// step, the loader, CUDA graph and NVML figures, memory peaks, and the verdict. Plain structs: build.h fills
// them from measurements, rules.h judges them, json.cpp / text.cpp render them. JSON schema:
// docs/report-schema.md ("liftoff.report/1").
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/profile/gpu_sampler.h"
#include "runtime/profile/profiler.h"

namespace liftoff {

constexpr const char* kReportSchema = "liftoff.report/1";
constexpr const char* kTraceSchema = "liftoff.trace/1";

// What the run was asked to do (filled by the tool; empty strings / zeros are "not known").
struct RunConfig {
  std::string tool = "train";
  std::string device = "cpu";  // "cpu" or "cuda:N"
  std::string device_name;     // GPU product name, when known
  std::string model;
  std::string data;
  int64_t batch = 0;  // micro-batch
  int64_t accum = 1;
  std::string amp = "off";  // off | bf16 | fp16
  std::string augment;      // resolved loader mode: gpu | cpu | none ("" when not known)
  int workers = 0;          // loader worker threads (0: batches are made on the training thread)
  int prefetch = 0;         // loader ring depth
  bool pin_memory = false;
  int threads = 0;              // CPU compute threads
  int host_cores = 0;           // logical cores available
  int world_size = 1;           // DDP processes
  std::string ddp_compress;     // DDP all-reduce of f32 gradients: "none" | "bf16"; "" single process/unknown
  bool cuda_available = false;  // a usable CUDA device exists (for suggestions on CPU runs)
  std::string activation_layout;  // what the runtime chose for 4-D activations: channels_last | contiguous
  std::string
      decode;         // who decodes image files: gpu (nvJPEG) | cpu (the loader workers) | hybrid (both) | ""
  bool jpeg = false;  // the training files are JPEGs (GPU decoding applies)
  // FLOPs of one image's forward, counted on the run's first micro-batch (0: not counted); with the run's
  // images/s and the device's peak this gives the achieved TFLOP/s and the MFU (runtime/profile/flops.h).
  double model_flops_per_image = 0.0;
};

struct StageReport {
  double host_ms = 0.0;             // mean per measured step (host clock, training thread)
  double host_share = 0.0;          // of the mean step wall time
  std::optional<double> device_ms;  // mean per step on the device (CUDA events); none when not measured
  std::optional<double> device_share;
  std::string device_source;  // "events" (profiler marks), "loader" (the DataLoader's copy/kernel events)
};

struct ThreadCpuReport {
  std::string name;
  int64_t tid = 0;
  double cpu_seconds = 0.0;        // during the measured interval
  std::optional<double> busy_pct;  // cpu_seconds / wall of that interval
};

struct LoaderReport {
  bool present = false;  // the run used the prefetching DataLoader and passed its stats
  // The figures cover the measured steps (RunMonitor::watch_loader), not every step: per-step device
  // figures then divide by the measured steps. Not in the JSON (only build_report reads it).
  bool measured_steps_only = false;
  int64_t batches = 0;
  double wait_ms_per_batch = 0.0;       // next() blocked for a worker
  std::vector<double> worker_busy_pct;  // busy wall time / steps wall time, per worker (can pass 100: the
                                        // workers also decode between steps, at an epoch's end)
  std::optional<double> worker_busy_pct_mean;
  // Decode loaders on CUDA: the workers' mean time blocked for the device to release a slot's staging
  // (back-pressure), percent of the steps' wall time like worker_busy_pct_mean.
  std::optional<double> worker_slot_wait_pct_mean;
  int64_t ring_slots = 0;  // decode loaders: the ring's slots (0: not known; --prefetch then)
  std::optional<double> cpu_augment_share;  // of the workers' busy time
  int64_t h2d_bytes_per_batch = 0;
  std::optional<double> h2d_ms_per_batch;  // copy-stream time (events)
  // Training-thread time issuing the copies (the copy itself from pageable memory); absent without a GPU.
  std::optional<double> h2d_issue_ms_per_batch;
  std::optional<double> h2d_gb_per_s;
  std::optional<double> augment_ms_per_batch;  // compute-stream time of the augmentation kernel (events)
  // Compute-stream time waiting for the batch's GPU decode (events around the wait): the device's data wait.
  std::optional<double> device_wait_ms_per_batch;
  // --decode auto on CUDA (the CPU + GPU hybrid): the share of the JPEGs nvJPEG could decode that the CPU
  // decoded, over the run and at the end.
  std::optional<double> hybrid_cpu_share_mean, hybrid_cpu_share_final;
  int64_t skipped_samples = 0;
  // --on-bad-sample skip on image folders (train and test): every file left out with its reason, and the
  // files the folders hold (0: not an image folder run).
  struct SkippedFile {
    std::string path;
    std::string reason;
    std::string found;  // "load" (the load-time check), "epoch N" (failed during it) or "end"
  };
  std::vector<SkippedFile> skipped_files;
  int64_t files_total = 0;
};

struct Verdict {
  std::string
      kind;  // input-bound | copy-bound | host/launch-bound | compute-bound | communication-bound | unknown
  std::string evidence;    // the numbers the rule used, and the figures that were not available
  std::string suggestion;  // the one change most likely to help ("--workers 8"), or "" when none applies
  std::string rule;        // the rule that fired (docs/report-schema.md), e.g. "R2 input"
};

// Thresholds of the verdict rules (docs/report-schema.md explains each).
struct VerdictThresholds {
  double copy_share = 0.30;         // R1: H2D time (device, or host issuing from pageable memory) / step wall
  double gpu_idle_for_copy = 0.80;  // R1: ... and GPU busy below this (or unknown)
  double input_share = 0.20;        // R2: data wait / step wall
  double comm_share = 0.20;         // R3: exposed all-reduce / step wall
  double gpu_busy = 0.80;           // R4/R5: GPU busy fraction separating compute- from host-bound
  double sm_idle = 0.30;         // R5: NVML utilization below this while the device is behind: tiny kernels
  int64_t nvml_min_samples = 5;  // NVML figures are used only with this many samples in the measured steps
  double node_latency_us = 2.5;  // R5: the least a CUDA graph node costs the device (launch latency)
  double latency_share = 0.50;   // R5: graph nodes x node latency above this share of the step: tiny kernels
  double cpu_compute_share = 0.50;  // R4 (CPU device): forward+backward+optimizer / step wall
  // Input-bound advice: workers busy at least this are saturated (decode/augment on the GPU, more workers or
  // cores); below it they idle while the step waits, and the loader's own bottleneck is named.
  double workers_busy = 0.60;
  // Workers busy at least this over the measured steps were not held up by the device's use of their slots:
  // a data wait with the device behind is then theirs (input-bound), not back-pressure.
  double workers_saturated = 0.85;
  double cpu_augment_share = 0.30;  // input-bound suggestion: CPU augmentation share of worker time
  int64_t small_batch = 256;        // host-bound suggestion: batches below this -> larger batch
  // R0 too-short: fewer measured steps than this, covering less time than min_measured_s, are too little
  // evidence for a verdict (start-up costs, a sample or two of NVML).
  int64_t min_steps = 10;
  double min_measured_s = 2.0;
  // The device keeps up with the host: it finished each step within this share of a step after the host
  // issued it, so it waited for the host between kernels whatever our stage spans say (not compute-bound
  // unless NVML, with enough samples, finds it busy).
  double keeps_up_share = 0.25;
};

// Whole-step CUDA graphs in the run (models/train/trainer.h GraphStatus).
struct GraphReport {
  std::string mode = "off";  // auto | on | off
  bool used = false;         // a step was captured and replayed
  std::string reason;        // why not used (or why they stopped); empty when used
  int64_t captured_at_step = -1;
  int64_t graph_steps = 0;  // optimizer steps run by the graph
  int64_t eager_steps = 0;  // optimizer steps run eagerly (warm-up, partial batches, fallback)
  int64_t nodes = 0;        // nodes in the captured graph
  int64_t streams = 1;      // concurrent streams its micro-batches ran on (models/train/trainer.h BranchMode)
  std::string streams_reason;  // why one stream, when accumulating
};

struct RunReport {
  std::string schema = kReportSchema;
  std::string created_utc;  // ISO 8601
  RunConfig config;

  int64_t steps_total = 0;
  int64_t steps_measured = 0;
  int64_t warmup_steps_excluded = 0;
  int64_t images_measured = 0;
  double wall_seconds = 0.0;  // sum of measured step wall times
  double step_ms_mean = 0.0;
  double step_ms_min = 0.0;
  double step_ms_max = 0.0;
  double step_ms_std = 0.0;
  // The run's throughput (runtime/profile/throughput.h): images_measured over throughput_seconds, the wall
  // time the device spent on the measured steps (their end events; the host clock on the CPU). The progress
  // line, the done line, the JSON and compare all show this one figure.
  double images_per_second = 0.0;
  double throughput_seconds = 0.0;
  std::array<StageReport, kNumStages> stages{};

  bool device_timing = false;  // CUDA event marks were recorded
  int64_t device_steps = 0;    // measured steps whose marks were resolved
  int64_t device_steps_dropped = 0;
  std::optional<double> device_busy_pct;  // events (see docs): share of wall with marked device work
  std::optional<double> device_lag_ms;    // mean: device finished the step this long after the host issued it
  std::optional<double> allreduce_exposed_ms;
  std::optional<double> allreduce_overlapped_ms;
  // DDP: every rank's mean step time (index = rank), filled on rank 0 after the run; a straggler shows here.
  std::vector<double> rank_step_ms;
  GraphReport graphs;
  // One-off start-up costs inside the run (runtime/profile/algorithm_search.h): cuDNN's algorithm searches,
  // each new convolution shape and direction's first use (warm-up steps, an evaluation's first batches).
  int64_t algorithm_searches = 0;
  double algorithm_search_seconds = 0.0;
  int64_t algorithms_restored = 0;  // choices restored from the store on disk instead (no search)
  std::string algorithm_store;      // that store's file ("" when none was used)
  GpuUtilization gpu;  // NVML, over the measured steps

  std::optional<int64_t> device_memory_peak_allocated;  // caching allocator
  std::optional<int64_t> device_memory_peak_reserved;
  // Peak allocated over the measured steps alone (after the warm-up): what training needs in steady state,
  // without one-off costs such as cuDNN's algorithm search.
  std::optional<int64_t> device_memory_steady_peak_allocated;
  std::optional<int64_t> device_memory_total;
  std::optional<int64_t> host_peak_rss;

  std::string cpu_source;  // "sampled" (1 Hz samples inside the steps) or "run" (start/end of the run)
  std::optional<double> main_thread_cpu_pct;
  std::optional<double> workers_cpu_pct_mean;  // threads named "loader-*"
  std::vector<ThreadCpuReport> threads;
  double process_cpu_seconds = 0.0;
  LoaderReport loader;

  Verdict verdict;

  std::string to_json() const;  // pretty-printed, schema liftoff.report/1 (json.cpp)
  // Parses and validates a report (schema version, required fields and types); throws IOError naming
  // `source` and the field's JSON path (json.cpp).
  static RunReport from_json(const std::string& text, const std::string& source = "report");
  std::string render_table() const;                // the end-of-run table (text.cpp)
  void write_json(const std::string& path) const;  // throws IOError (json.cpp)
};

}  // namespace liftoff
