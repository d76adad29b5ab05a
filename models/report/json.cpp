// RunReport <-> JSON (schema liftoff.report/1, docs/report-schema.md) through one description per struct
// (json.h): to_json and from_json walk the same field lists.
#include "models/report/json.h"

#include <fstream>

#include "models/report/run_report.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

using report_json::json;
using report_json::JsonReader;
using report_json::JsonWriter;
using report_json::null_unless;

// Each describe_* takes the struct const (writing) or not (reading).

template <class Io, class C>
void describe_config(Io& io, C& c) {
  io("tool", c.tool);
  io("device", c.device);
  io("device_name", c.device_name);
  io("model", c.model);
  io("data", c.data);
  io("batch", c.batch);
  io("accum", c.accum);
  io("amp", c.amp);
  io("augment", c.augment);
  io("workers", c.workers);
  io("prefetch", c.prefetch);
  io("pin_memory", c.pin_memory);
  io("threads", c.threads);
  io("host_cores", c.host_cores);
  io("world_size", c.world_size);
  io("cuda_available", c.cuda_available);
  io.when_present(  // DDP runs only (absent otherwise and in older reports)
      "ddp_compress", [&](auto& later) { later("ddp_compress", c.ddp_compress); }, !c.ddp_compress.empty());
  io.when_present(  // absent in reports written before it existed, and in reports that do not know it
      "activation_layout",
      [&](auto& later) {
        later("activation_layout", c.activation_layout);
        later("model_flops_per_image", c.model_flops_per_image);
      },
      !c.activation_layout.empty());
  io.when_present(  // image files decoded (absent otherwise, and in older reports)
      "decode",
      [&](auto& later) {
        later("decode", c.decode);
        later("jpeg", c.jpeg);
      },
      !c.decode.empty());
}

template <class Io, class R>
void describe_steps(Io& io, R& r) {
  io("total", r.steps_total);
  io("measured", r.steps_measured);
  io("warmup_excluded", r.warmup_steps_excluded);
  io("images", r.images_measured);
  io("wall_s", r.wall_seconds);
  io.object("step_ms", [&](auto& m) {
    m("mean", r.step_ms_mean);
    m("min", r.step_ms_min);
    m("max", r.step_ms_max);
    m("std", r.step_ms_std);
  });
  io("images_per_s", r.images_per_second);
  io.when_present("throughput_s", [&](auto& later) { later("throughput_s", r.throughput_seconds); });
}

template <class Io, class S>
void describe_stage(Io& io, S& s) {
  io("host_ms", s.host_ms);
  io("host_share", s.host_share);
  io("device_ms", s.device_ms);
  io("device_share", s.device_share);
  io("device_source", s.device_source);
}

template <class Io, class R>
void describe_device(Io& io, R& r) {
  io("timing", r.device_timing);
  io("timed_steps", r.device_steps);
  io("dropped_steps", r.device_steps_dropped);
  io("busy_pct", r.device_busy_pct);
  io("lag_ms", r.device_lag_ms);
  io("allreduce_exposed_ms", r.allreduce_exposed_ms);
  io("allreduce_overlapped_ms", r.allreduce_overlapped_ms);
}

template <class Io, class G>
void describe_graphs(Io& io, G& g) {
  io("mode", g.mode);
  io("used", g.used);
  io("reason", g.reason);
  io("captured_at_step", g.captured_at_step);
  io("graph_steps", g.graph_steps);
  io("eager_steps", g.eager_steps);
  io("nodes", g.nodes);
  io.when_present("streams", [&](auto& later) {  // concurrent micro-batches
    later("streams", g.streams);
    later("streams_reason", g.streams_reason);
  });
}

// NVML figures are null unless NVML sampled the device.
template <class Io, class G>
void describe_nvml(Io& io, G& g) {
  io("available", g.available);
  io("reason", g.reason);
  io("index", g.nvml_index);
  io("samples", g.samples);
  const bool sampled = g.available && g.samples > 0;  // reading: ignored (null reads as 0)
  io("util_mean_pct", null_unless(sampled, g.util_mean_pct));
  io("util_max_pct", null_unless(sampled, g.util_max_pct));
  io("mem_util_mean_pct", null_unless(sampled, g.mem_util_mean_pct));
  io("memory_used_max", null_unless(sampled, g.memory_used_max));
  io("memory_total", null_unless(sampled, g.memory_total));
  io("sm_clock_mean_mhz", null_unless(sampled, g.sm_clock_mean_mhz));
  io("power_mean_w", null_unless(sampled, g.power_mean_w));
}

template <class Io, class R>
void describe_memory(Io& io, R& r) {
  io("device_peak_allocated", r.device_memory_peak_allocated);
  io("device_peak_reserved", r.device_memory_peak_reserved);
  io.when_present("device_steady_peak_allocated", [&](auto& later) {
    later("device_steady_peak_allocated", r.device_memory_steady_peak_allocated);
  });
  io("device_total", r.device_memory_total);
  io("host_peak_rss", r.host_peak_rss);
}

template <class Io, class R>
void describe_cpu(Io& io, R& r) {
  io("source", r.cpu_source);
  io("process_cpu_s", r.process_cpu_seconds);
  io("main_thread_pct", r.main_thread_cpu_pct);
  io("workers_pct_mean", r.workers_cpu_pct_mean);
  io.array("threads", r.threads, [](auto& t, auto& th) {
    t("name", th.name);
    t("tid", th.tid);
    t("cpu_s", th.cpu_seconds);
    t("busy_pct", th.busy_pct);
  });
}

template <class Io, class L>
void describe_loader(Io& io, L& l) {
  io("present", l.present);
  io("batches", l.batches);
  io("wait_ms_per_batch", l.wait_ms_per_batch);
  io("worker_busy_pct", l.worker_busy_pct);
  io("worker_busy_pct_mean", l.worker_busy_pct_mean);
  io.when_present(
      "worker_slot_wait_pct_mean",  // decode loaders on CUDA whose workers waited (absent otherwise)
      [&](auto& later) { later("worker_slot_wait_pct_mean", l.worker_slot_wait_pct_mean); },
      l.worker_slot_wait_pct_mean.has_value());
  io.when_present(
      "ring_slots",  // decode loaders (absent otherwise and in older reports)
      [&](auto& later) { later("ring_slots", l.ring_slots); }, l.ring_slots > 0);
  io("cpu_augment_share", l.cpu_augment_share);
  io("h2d_bytes_per_batch", l.h2d_bytes_per_batch);
  io("h2d_ms_per_batch", l.h2d_ms_per_batch);
  io.when_present("h2d_issue_ms_per_batch",
                  [&](auto& later) { later("h2d_issue_ms_per_batch", l.h2d_issue_ms_per_batch); });
  io("h2d_gb_per_s", l.h2d_gb_per_s);
  io("augment_ms_per_batch", l.augment_ms_per_batch);
  io.when_present(
      "device_wait_ms_per_batch",  // decode loaders on CUDA (absent otherwise and in older reports)
      [&](auto& later) { later("device_wait_ms_per_batch", l.device_wait_ms_per_batch); },
      l.device_wait_ms_per_batch.has_value());
  io.when_present(  // the CPU + GPU decode hybrid only
      "hybrid_cpu_share_mean",
      [&](auto& later) {
        later("hybrid_cpu_share_mean", l.hybrid_cpu_share_mean);
        later("hybrid_cpu_share_final", l.hybrid_cpu_share_final);
      },
      l.hybrid_cpu_share_mean.has_value());
  io("skipped_samples", l.skipped_samples);
  io.when_present(  // image folders only (issue 27)
      "files_total",
      [&](auto& later) {
        later("files_total", l.files_total);
        later.array("skipped_files", l.skipped_files, [](auto& f, auto& file) {
          f("path", file.path);
          f("reason", file.reason);
          f("found", file.found);
        });
      },
      l.files_total > 0);
}

template <class Io, class V>
void describe_verdict(Io& io, V& v) {
  io("kind", v.kind);
  io("rule", v.rule);
  io("evidence", v.evidence);
  io("suggestion", v.suggestion);
}

// Everything after "schema", in the order of the file.
template <class Io, class R>
void describe_report(Io& io, R& r) {
  io("created_utc", r.created_utc);
  io.object("config", [&](auto& sub) { describe_config(sub, r.config); });
  io.object("steps", [&](auto& sub) { describe_steps(sub, r); });
  io.object("stages", [&](auto& sub) {
    for (int i = 0; i < kNumStages; ++i) {
      sub.object(stage_name(static_cast<Stage>(i)),
                 [&](auto& s) { describe_stage(s, r.stages[static_cast<size_t>(i)]); });
    }
  });
  io.object("device", [&](auto& sub) { describe_device(sub, r); });
  io.when_present(  // DDP runs only
      "ranks",
      [&](auto& later) { later.object("ranks", [&](auto& sub) { sub("step_ms", r.rank_step_ms); }); },
      !r.rank_step_ms.empty());
  io.when_present("cuda_graphs", [&](auto& later) {  // absent in reports written before graphs existed
    later.object("cuda_graphs", [&](auto& sub) { describe_graphs(sub, r.graphs); });
  });
  io.when_present("startup", [&](auto& later) {  // absent in reports written before session 19
    later.object("startup", [&](auto& sub) {
      sub("algorithm_searches", r.algorithm_searches);
      sub("algorithm_search_seconds", r.algorithm_search_seconds);
      sub("algorithms_restored", r.algorithms_restored);
      sub("algorithm_store", r.algorithm_store);
    });
  });
  io.object("nvml", [&](auto& sub) { describe_nvml(sub, r.gpu); });
  io.object("memory", [&](auto& sub) { describe_memory(sub, r); });
  io.object("cpu", [&](auto& sub) { describe_cpu(sub, r); });
  io.object("loader", [&](auto& sub) { describe_loader(sub, r.loader); });
  io.object("verdict", [&](auto& sub) { describe_verdict(sub, r.verdict); });
}

}  // namespace

std::string RunReport::to_json() const {
  json j;
  JsonWriter w(j);
  w("schema", schema);
  describe_report(w, *this);
  return j.dump(2) + "\n";
}

RunReport RunReport::from_json(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw IOError(src + ": not valid JSON: " + e.what());
  }
  JsonReader reader(j, src, std::string(kReportSchema) + " report");
  RunReport r;
  reader("schema", r.schema);
  if (r.schema != kReportSchema) {
    throw IOError(src + ": report schema '" + r.schema + "' is not supported (this build reads " +
                  kReportSchema + ")");
  }
  describe_report(reader, r);
  return r;
}

void RunReport::write_json(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IOError("cannot write the report to '" + path + "'");
  out << to_json();
  out.flush();
  if (!out) throw IOError("writing the report to '" + path + "' failed");
}

}  // namespace liftoff
