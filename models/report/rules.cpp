#include "models/report/rules.h"

#include <algorithm>

#include "models/report/format.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

using report_format::fmt;
using report_format::pct;

Verdict verdict(const char* kind, std::string evidence, std::string suggestion = "") {
  Verdict v;
  v.kind = kind;
  v.evidence = std::move(evidence);
  v.suggestion = std::move(suggestion);
  return v;
}

// R1-R3 compete: among those that fire, the largest share of the step wins (the first on a tie).
enum class ShareRule { none, copy, input, comm };

ShareRule largest_share(const VerdictFacts& f, const VerdictThresholds& th) {
  // R1: H2D copies take a large share of the step and the GPU is not kept busy meanwhile.
  const bool copy = f.has_h2d && f.h2d_share >= th.copy_share && (!f.busy || *f.busy < th.gpu_idle_for_copy);
  // R2: the training thread waits for data, and the device is not what holds it back.
  // A device-side wait (the compute stream waiting for GPU decode) is not back-pressure.
  const bool input =
      f.wait_share >= th.input_share && (f.device_wait || (!f.back_pressure && !f.latency_bound));
  // R3: all-reduce time not hidden behind backward.
  const bool comm = f.has_comm && f.comm_share >= th.comm_share;
  double best = -1.0;
  ShareRule pick = ShareRule::none;
  if (copy && f.h2d_share > best) best = f.h2d_share, pick = ShareRule::copy;
  if (input && f.wait_share > best) best = f.wait_share, pick = ShareRule::input;
  if (comm && f.comm_share > best) best = f.comm_share, pick = ShareRule::comm;
  return pick;
}

std::optional<Verdict> no_steps(const RunReport&, const VerdictFacts& f, const VerdictThresholds&) {
  if (f.measured) return std::nullopt;
  return verdict("unknown", "no training step was measured");
}

// Start-up costs (cuDNN's searches, allocator growth) and a sample or two of NVML are no evidence: better no
// verdict than a confident wrong one.
std::optional<Verdict> too_short(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  if (!f.too_short) return std::nullopt;
  std::string e = "too short to judge: " + f.thin_text + "; a verdict needs " + std::to_string(th.min_steps) +
                  " steps after the warm-up or " + fmt("%.0f", th.min_measured_s) + " s of them";
  if (r.warmup_steps_excluded == 0) e += " (these include the start-up: no step came after the warm-up)";
  return verdict("unknown", e, "a longer run (--max-steps 100 or more)");
}

std::optional<Verdict> copy_bound(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  if (largest_share(f, th) != ShareRule::copy) return std::nullopt;
  const RunConfig& c = r.config;
  std::string e = "host-to-device copies took " + fmt("%.2f", f.h2d_ms) + " ms/step (" + pct(f.h2d_share) +
                  " of the " + f.step_text + ")";
  if (f.host_copy) {
    e += " on the training thread" +
         std::string(c.pin_memory ? "" : " (from pageable memory, the thread does the copy)");
    if (r.loader.h2d_issue_ms_per_batch && *r.loader.h2d_issue_ms_per_batch > 0) {
      e += " at " +
           fmt("%.1f", static_cast<double>(r.loader.h2d_bytes_per_batch) /
                           (*r.loader.h2d_issue_ms_per_batch * 1e-3) / 1e9) +
           " GB/s";
    }
  } else if (r.loader.h2d_gb_per_s) {
    e += " at " + fmt("%.1f", *r.loader.h2d_gb_per_s) + " GB/s";
  }
  e += "; " + (f.busy_text.empty() ? std::string("GPU busy not measured") : f.busy_text);
  std::string suggestion;
  if (!c.pin_memory) {
    suggestion = "--pin-memory";
  } else if (c.augment == "cpu") {
    suggestion = "--augment gpu";  // copy uint8 pixels instead of f32: 4x fewer bytes
  }
  return verdict("copy-bound", e, suggestion);
}

// Saturated workers: the CPU work per batch is what to move or spread (decode or augment on the GPU, more
// workers, more cores). Appends to `evidence` what explains the choice.
std::string saturated_workers_suggestion(const RunReport& r, const VerdictFacts& f, std::string& evidence) {
  const RunConfig& c = r.config;
  const int cores = c.host_cores;
  // This rank's share of the cores (ranks on one machine share them), one left to the training thread.
  const int share = std::max(1, cores / std::max(1, c.world_size));
  const int limit = share > 1 ? share - 1 : c.workers;
  const int w = std::min(2 * c.workers, limit);
  if (f.cuda && c.decode == "cpu" && c.jpeg) {
    evidence += "; the workers decode JPEGs on the CPU";
    // More workers first where half as many again fit the cores (on an H100 host 8 workers instead of 4 took
    // ResNet-50 from 87% to 98.6% of its speed on on-GPU data, the hybrid only to 85%: nvJPEG shares the GPU
    // with the model); else the hybrid gives nvJPEG what the workers cannot take.
    return 2 * w >= 3 * c.workers ? "--workers " + std::to_string(w) : "--decode auto";
  }
  if (w > c.workers) return "--workers " + std::to_string(w);
  if (f.cuda && c.augment == "cpu") return "--augment gpu";
  evidence += "; the workers already use every core (" + std::to_string(cores) + ")";
  return "more CPU cores, or lighter decoding (smaller stored images)";
}

// Workers' time blocked on the device's use of their slots (percent of the measured steps' time) that names
// the ring's depth as the loader's hold-up.
constexpr double kSlotWaitPct = 20.0;

// Idle workers while the step waits: the hold-up is in the loader itself. Names its largest measured stage.
std::string idle_workers_suggestion(const RunReport& r, std::string& evidence) {
  const RunConfig& c = r.config;
  const LoaderReport& l = r.loader;
  const int depth = c.prefetch > 0 ? c.prefetch : 2 * c.workers;
  if (c.prefetch > 0 && c.prefetch <= c.workers) {
    evidence += "; the ring holds " + std::to_string(c.prefetch) + " batches for " +
                std::to_string(c.workers) + " workers: the workers wait for free slots";
    return "--prefetch " + std::to_string(2 * c.workers);
  }
  // Workers blocked on the device (every slot's staging still read by queued device work): a deeper ring
  // lets them decode further ahead of a device that runs behind the host.
  if (l.worker_slot_wait_pct_mean && *l.worker_slot_wait_pct_mean >= kSlotWaitPct) {
    const int64_t slots = l.ring_slots > 0 ? l.ring_slots : depth;
    evidence += "; the workers waited " + fmt("%.0f%%", *l.worker_slot_wait_pct_mean) +
                " of the measured steps' time for the device to finish with their slots (a ring of " +
                std::to_string(slots) + ")";
    return "--prefetch " + std::to_string(2 * slots);
  }
  struct Piece {
    const char* what;
    std::optional<double> ms;
  };
  // With GPU decoding the loader's h2d figure is its decode streams' time (nvJPEG next to the model).
  const bool gpu_decode = gpu_decoding(c);
  const Piece pieces[] = {
      {gpu_decode ? "GPU decoding (the decode streams)" : "the host-to-device copy (copy stream)",
       l.h2d_ms_per_batch},
      {"issuing the copies on the training thread", l.h2d_issue_ms_per_batch},
      {"the GPU augmentation kernel", l.augment_ms_per_batch}};
  const Piece* largest = nullptr;
  for (const Piece& p : pieces) {
    if (p.ms && (!largest || *p.ms > *largest->ms)) largest = &p;
  }
  if (!largest) {
    evidence += "; the loader's own stages were not measured";
    return "--prefetch " + std::to_string(2 * depth);  // the workers' burstiness is what is left
  }
  evidence += "; the loader's own largest stage is " + std::string(largest->what) + ", " +
              fmt("%.2f", *largest->ms) + " ms per batch";
  if (largest == &pieces[0] && gpu_decode) {
    // The hybrid already gives the workers what its controller finds they sustain.
    return c.decode == "gpu" ? "--decode auto" : "";
  }
  if (largest != &pieces[2] && !c.pin_memory) return "--pin-memory";
  if (largest == &pieces[0] && c.augment == "cpu") return "--augment gpu";  // uint8 copies: 4x fewer bytes
  if (largest == &pieces[2]) return "";  // the kernel is the device's work; nothing on the host to change
  return "--prefetch " + std::to_string(2 * depth);
}

// The input-bound suggestion; appends to `evidence` what explains it (or why there is none).
std::string input_suggestion(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th,
                             std::string& evidence) {
  const RunConfig& c = r.config;
  const int cores = c.host_cores;
  if (c.workers <= 0)
    return "--workers " + std::to_string(std::max(2, std::min(8, cores > 1 ? cores - 1 : 2)));
  if (f.device_wait && c.decode == "gpu") {
    evidence += "; nvJPEG decodes on the training GPU";
    return "--decode auto";  // the CPU + GPU hybrid: the workers take what they can
  }
  if (f.cuda && c.augment == "cpu" && r.loader.cpu_augment_share &&
      *r.loader.cpu_augment_share >= th.cpu_augment_share) {
    evidence += "; CPU augmentation is " + pct(*r.loader.cpu_augment_share) + " of the workers' time";
    return "--augment gpu";
  }
  if (!f.workers_busy) return "--workers " + std::to_string(2 * c.workers);
  if (*f.workers_busy >= th.workers_busy) return saturated_workers_suggestion(r, f, evidence);
  return idle_workers_suggestion(r, evidence);
}

std::optional<Verdict> input_bound(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  if (largest_share(f, th) != ShareRule::input) return std::nullopt;
  std::string e =
      "the step waited " + pct(f.wait_share) + " of its time for data (" + fmt("%.2f", f.wait_ms) + " of " +
      fmt("%.2f", f.wall_ms) + " ms/step" +
      (f.device_wait ? ", on the device: the compute stream waited for the batches' GPU decode" : "") +
      ") while " + f.workers_text;
  if (!f.busy_text.empty()) e += "; " + f.busy_text;
  const std::string suggestion = input_suggestion(r, f, th, e);
  return verdict("input-bound", e, suggestion);
}

std::optional<Verdict> communication_bound(const RunReport& r, const VerdictFacts& f,
                                           const VerdictThresholds& th) {
  if (largest_share(f, th) != ShareRule::comm) return std::nullopt;
  std::string e = "all-reduce left " + fmt("%.2f", f.comm_ms) + " ms/step exposed (" + pct(f.comm_share) +
                  " of the " + f.step_text + ")";
  if (r.allreduce_overlapped_ms)
    e += "; " + fmt("%.2f", *r.allreduce_overlapped_ms) + " ms/step overlapped backward";
  // Fewer all-reduces per image.
  return verdict("communication-bound", e,
                 "--accum " + std::to_string(2 * std::max<int64_t>(r.config.accum, 1)));
}

std::optional<Verdict> cpu_compute(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  if (f.cuda || f.compute_share < th.cpu_compute_share) return std::nullopt;
  const RunConfig& c = r.config;
  std::string e = "forward+backward+optimizer took " + pct(f.compute_share) + " of the step on the CPU (" +
                  fmt("%.2f", f.compute_ms) + " of " + fmt("%.2f", f.wall_ms) + " ms/step); " + f.shares_text;
  if (r.main_thread_cpu_pct) e += "; main thread CPU " + fmt("%.0f%%", *r.main_thread_cpu_pct);
  std::string suggestion;
  if (c.cuda_available) {
    suggestion = "--device cuda";
  } else if (c.threads > 0 && c.host_cores > c.threads) {
    suggestion = "--threads " + std::to_string(c.host_cores);
  }
  return verdict("compute-bound", e, suggestion);
}

std::optional<Verdict> cpu_host(const RunReport&, const VerdictFacts& f, const VerdictThresholds&) {
  if (f.cuda) return std::nullopt;
  return verdict("host/launch-bound", "work outside the timed stages ('other') took " + pct(f.other_share) +
                                          " of the step; forward+backward+optimizer " + pct(f.compute_share) +
                                          "; " + f.shares_text);
}

std::optional<Verdict> unmeasured(const RunReport&, const VerdictFacts& f, const VerdictThresholds&) {
  if (!f.cuda || f.busy) return std::nullopt;
  return verdict("unknown",
                 f.busy_text + "; " + f.shares_text + ": cannot tell compute-bound from host-bound");
}

std::optional<Verdict> gpu_compute(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  if (!f.cuda || !f.busy || f.latency_bound || !(*f.busy >= th.gpu_busy || f.back_pressure))
    return std::nullopt;
  // A device that drains the host's launches as they come waits for the host, however full our spans look.
  if (f.host_paced && !f.nvml_busy) return std::nullopt;
  std::string e = f.busy_text + "; " + f.shares_text;
  if (r.device_lag_ms) e += "; the device ran " + fmt("%.2f", *r.device_lag_ms) + " ms behind the host";
  if (f.back_pressure && f.wait_share >= th.input_share)
    e += " (the data wait is back-pressure: the loader waits for the device to release buffers)";
  const std::string& amp = r.config.amp;
  std::string suggestion = amp == "off" || amp.empty() ? "--amp bf16" : "";
  // nvJPEG shares the busy GPU with the model. With idle workers under --decode gpu, the hybrid lets them
  // take a share (its controller moves what they sustain); the hybrid itself already does, so no advice there
  // (on the H200 a small folder's --decode cpu run was input-bound while the hybrid was not).
  if (f.gpu_decode_ms) {
    e += "; nvJPEG decodes on this GPU next to the model";
    if (f.workers_busy) e += " while " + f.workers_text;
    if (suggestion.empty() && r.config.decode == "gpu" && f.workers_busy && *f.workers_busy < th.workers_busy)
      suggestion = "--decode auto";
  }
  return verdict("compute-bound", e, suggestion);
}

// Why the device idles or crawls while the host issues the step.
std::string host_bound_evidence(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  std::string e = f.busy_text + " although " + f.shares_text;
  if (f.latency_bound) {
    e += "; the device ran " + fmt("%.2f", *r.device_lag_ms) + " ms behind the host inside our stages";
    e += f.sms_idle
             ? ", yet NVML found its SMs mostly idle"
             : ", and the graph's " + std::to_string(r.graphs.nodes) + " nodes alone take about " +
                   fmt("%.2f", f.node_floor_ms) + " ms at " + fmt("%.1f", th.node_latency_us) + " us each";
    e += ": too little work per kernel";
    if (f.wait_share >= th.input_share) e += " (the data wait is back-pressure)";
  } else if (r.device_lag_ms) {
    e += "; the device finished each step " + fmt("%.2f", *r.device_lag_ms) +
         " ms after the host issued it (it waits for the host)";
  }
  e += "; the host spent " + fmt("%.2f", f.compute_ms) + " ms/step issuing forward+backward+optimizer";
  return e;
}

// The fallback of CUDA runs: the GPU idles and neither data, copies nor communication explain it, or it
// works through kernels too small to fill it.
std::optional<Verdict> gpu_host(const RunReport& r, const VerdictFacts& f, const VerdictThresholds& th) {
  const RunConfig& c = r.config;
  std::string e = host_bound_evidence(r, f, th);
  bool memory_room = true;
  if (r.device_memory_peak_reserved && r.device_memory_total && *r.device_memory_total > 0) {
    memory_room = 2.0 * static_cast<double>(*r.device_memory_peak_reserved) <
                  0.9 * static_cast<double>(*r.device_memory_total);
    e += "; device memory peak " + format_bytes(*r.device_memory_peak_reserved) + " of " +
         format_bytes(*r.device_memory_total);
  }
  if (r.graphs.used)
    e += "; the step already runs as a CUDA graph (" + std::to_string(r.graphs.nodes) + " nodes)";
  std::string suggestion = "more work per launch: a larger --batch";
  if (c.batch > 0 && c.batch < th.small_batch && memory_room) {
    suggestion = "--batch " + std::to_string(2 * c.batch);
  } else if (!r.graphs.used && !f.latency_bound) {
    suggestion = "CUDA graphs";
  }
  return verdict("host/launch-bound", e, suggestion);
}

}  // namespace

const std::vector<VerdictRule>& verdict_rules() {
  static const std::vector<VerdictRule> rules = {
      {"R0 no-steps", no_steps},
      {"R0 too-short", too_short},
      {"R1 copy", copy_bound},
      {"R2 input", input_bound},
      {"R3 communication", communication_bound},
      {"R4 compute (cpu)", cpu_compute},
      {"R5 host (cpu)", cpu_host},
      {"R6 unmeasured", unmeasured},
      {"R4 compute", gpu_compute},
      {"R5 host", gpu_host},
  };
  return rules;
}

const VerdictRule& verdict_rule(const std::string& name) {
  std::string known;
  for (const VerdictRule& rule : verdict_rules()) {
    if (name == rule.name) return rule;
    known += (known.empty() ? "'" : ", '") + std::string(rule.name) + "'";
  }
  throw ValueError("verdict_rule: no rule named '" + name + "' (known: " + known + ")");
}

Verdict diagnose(const RunReport& report, const VerdictThresholds& thresholds) {
  const VerdictFacts facts = compute_facts(report, thresholds);
  for (const VerdictRule& rule : verdict_rules()) {
    if (std::optional<Verdict> v = rule.apply(report, facts, thresholds)) {
      v->rule = rule.name;
      return *v;
    }
  }
  return verdict("unknown", "no rule applied");  // not reached: R5 host is the fallback
}

}  // namespace liftoff
