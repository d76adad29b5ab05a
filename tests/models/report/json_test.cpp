// The report's JSON (schema liftoff.report/1, docs/report-schema.md): byte for byte the same file as before
// the field descriptions (json.cpp), round trips, documented fields and types, reports written before a field
// existed, and errors that name the file and the field's JSON path.
#include "models/report/run_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "tests/models/report/report_fixtures.h"

namespace liftoff {
namespace {

using json = nlohmann::json;
using report_testing::recorded_config;
using report_testing::recorded_measurements;

// The error from_json gives for `text` ("" when it accepts it).
std::string from_json_error(const std::string& text) {
  try {
    RunReport::from_json(text, "run.json");
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

TEST(Report, JsonRoundTripKeepsEveryField) {
  const RunReport r = build_report(recorded_config(), recorded_measurements());
  const std::string text = r.to_json();
  const RunReport back = RunReport::from_json(text, "mem");
  EXPECT_EQ(back.to_json(), text);
  EXPECT_EQ(back.verdict.kind, r.verdict.kind);
  EXPECT_EQ(back.config.model, "resnet20");
}

TEST(Report, JsonSchemaHasTheDocumentedFieldsAndTypes) {
  const json j = json::parse(build_report(recorded_config(), recorded_measurements()).to_json());
  EXPECT_EQ(j.at("schema"), "liftoff.report/1");
  for (const char* k : {"schema", "created_utc", "config", "steps", "stages", "device", "nvml", "memory",
                        "cpu", "loader", "verdict"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_TRUE(j.at("config").at("batch").is_number_integer());
  EXPECT_TRUE(j.at("config").at("pin_memory").is_boolean());
  EXPECT_TRUE(j.at("steps").at("images_per_s").is_number());
  EXPECT_TRUE(j.at("steps").at("step_ms").at("mean").is_number());
  ASSERT_EQ(j.at("stages").size(), static_cast<size_t>(kNumStages));
  for (int i = 0; i < kNumStages; ++i) {
    const json& s = j.at("stages").at(stage_name(static_cast<Stage>(i)));
    EXPECT_TRUE(s.at("host_ms").is_number());
    EXPECT_TRUE(s.at("host_share").is_number());
    EXPECT_TRUE(s.at("device_ms").is_number() || s.at("device_ms").is_null());
    EXPECT_TRUE(s.at("device_source").is_string());
  }
  EXPECT_TRUE(j.at("stages").at("optimizer").at("device_ms").is_null());  // not measured: null, not 0
  EXPECT_TRUE(j.at("device").at("busy_pct").is_number());
  EXPECT_TRUE(j.at("device").at("allreduce_exposed_ms").is_null());
  EXPECT_TRUE(j.at("nvml").at("util_mean_pct").is_number());
  EXPECT_TRUE(j.at("memory").at("host_peak_rss").is_number_integer());
  EXPECT_TRUE(j.at("cpu").at("threads").is_array());
  EXPECT_TRUE(j.at("loader").at("worker_busy_pct").is_array());
  for (const char* k : {"kind", "rule", "evidence", "suggestion"})
    EXPECT_TRUE(j.at("verdict").at(k).is_string()) << k;
  EXPECT_TRUE(j.at("cuda_graphs").at("used").is_boolean());
  EXPECT_TRUE(j.at("cuda_graphs").at("mode").is_string());
  EXPECT_TRUE(j.at("cuda_graphs").at("reason").is_string());
  EXPECT_TRUE(j.at("cuda_graphs").at("streams_reason").is_string());
  for (const char* k : {"captured_at_step", "graph_steps", "eager_steps", "nodes", "streams"})
    EXPECT_TRUE(j.at("cuda_graphs").at(k).is_number_integer()) << k;
}

// A DDP run says how its gradients travelled; a single-process report has no such field.
TEST(Report, DdpCompressionIsInTheConfigOfDdpRunsOnly) {
  RunConfig config = recorded_config();
  EXPECT_FALSE(json::parse(build_report(config, recorded_measurements()).to_json())
                   .at("config")
                   .contains("ddp_compress"));
  config.world_size = 2;
  config.ddp_compress = "bf16";
  const RunReport r = build_report(config, recorded_measurements());
  EXPECT_EQ(json::parse(r.to_json()).at("config").at("ddp_compress"), "bf16");
  EXPECT_EQ(RunReport::from_json(r.to_json(), "mem").config.ddp_compress, "bf16");
}

TEST(Report, NvmlAbsentIsNullNotZero) {
  RunMeasurements m = recorded_measurements();
  m.gpu = GpuUtilization{};
  m.gpu->reason = "NVML not available";
  const json j = json::parse(build_report(recorded_config(), m).to_json());
  EXPECT_FALSE(j.at("nvml").at("available").get<bool>());
  EXPECT_TRUE(j.at("nvml").at("util_mean_pct").is_null());
  EXPECT_TRUE(j.at("nvml").at("power_mean_w").is_null());
  EXPECT_EQ(j.at("nvml").at("reason"), "NVML not available");
}

TEST(Report, FromJsonRejectsBadReports) {
  const std::string good = build_report(recorded_config(), recorded_measurements()).to_json();
  EXPECT_THROW(RunReport::from_json("{", "x.json"), IOError);
  json j = json::parse(good);
  j["schema"] = "liftoff.report/2";
  try {
    RunReport::from_json(j.dump(), "x.json");
    FAIL() << "accepted a newer schema";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("liftoff.report/2"), std::string::npos);
  }
  j = json::parse(good);
  j["stages"]["backward"].erase("host_ms");
  try {
    RunReport::from_json(j.dump(), "x.json");
    FAIL() << "accepted a report without stages.backward.host_ms";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("stages.backward.host_ms"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
  }
  j = json::parse(good);
  j["config"]["batch"] = "128";
  EXPECT_THROW(RunReport::from_json(j.dump(), "x.json"), IOError);
}

// Everything the writer can emit (DDP ranks, graphs on two streams, the steady-state peak, the loader's issue
// time), written by the code before the JSON moved to field descriptions. The file must not change.
constexpr const char* kGolden = R"json({
  "schema": "liftoff.report/1",
  "created_utc": "2025-06-01T12:00:00Z",
  "config": {
    "tool": "train",
    "device": "cuda:0",
    "device_name": "",
    "model": "resnet20",
    "data": "cifar10",
    "batch": 128,
    "accum": 1,
    "amp": "off",
    "augment": "gpu",
    "workers": 2,
    "prefetch": 0,
    "pin_memory": true,
    "threads": 0,
    "host_cores": 8,
    "world_size": 1,
    "cuda_available": false
  },
  "steps": {
    "total": 12,
    "measured": 10,
    "warmup_excluded": 2,
    "images": 1280,
    "wall_s": 0.2,
    "step_ms": {
      "mean": 20.0,
      "min": 19.0,
      "max": 21.0,
      "std": 0.4472135954999452
    },
    "images_per_s": 6400.0,
    "throughput_s": 0.2
  },
  "stages": {
    "data_wait": {
      "host_ms": 0.98,
      "host_share": 0.049,
      "device_ms": null,
      "device_share": null,
      "device_source": ""
    },
    "h2d": {
      "host_ms": 0.02,
      "host_share": 0.001,
      "device_ms": 0.5,
      "device_share": 0.025,
      "device_source": "loader"
    },
    "augment": {
      "host_ms": 0.0,
      "host_share": 0.0,
      "device_ms": 0.19999999999999998,
      "device_share": 0.009999999999999998,
      "device_source": "loader"
    },
    "forward": {
      "host_ms": 6.0,
      "host_share": 0.3,
      "device_ms": 5.0,
      "device_share": 0.25,
      "device_source": "events"
    },
    "backward": {
      "host_ms": 10.0,
      "host_share": 0.5,
      "device_ms": 10.0,
      "device_share": 0.5,
      "device_source": "events"
    },
    "allreduce": {
      "host_ms": 0.0,
      "host_share": 0.0,
      "device_ms": 2.0,
      "device_share": 0.1,
      "device_source": "ddp"
    },
    "optimizer": {
      "host_ms": 2.0,
      "host_share": 0.1,
      "device_ms": null,
      "device_share": null,
      "device_source": ""
    },
    "other": {
      "host_ms": 1.0,
      "host_share": 0.05,
      "device_ms": null,
      "device_share": null,
      "device_source": ""
    }
  },
  "device": {
    "timing": true,
    "timed_steps": 8,
    "dropped_steps": 0,
    "busy_pct": 76.0,
    "lag_ms": 1.0,
    "allreduce_exposed_ms": 0.5,
    "allreduce_overlapped_ms": 1.5
  },
  "ranks": {
    "step_ms": [
      20.0,
      25.5
    ]
  },
  "cuda_graphs": {
    "mode": "auto",
    "used": true,
    "reason": "",
    "captured_at_step": 3,
    "graph_steps": 97,
    "eager_steps": 4,
    "nodes": 640,
    "streams": 2,
    "streams_reason": ""
  },
  "startup": {
    "algorithm_searches": 21,
    "algorithm_search_seconds": 0.75,
    "algorithms_restored": 3,
    "algorithm_store": "/home/user/.cache/liftoff/conv-algorithms-v1-GPU.tsv"
  },
  "nvml": {
    "available": true,
    "reason": "",
    "index": -1,
    "samples": 30,
    "util_mean_pct": 74.0,
    "util_max_pct": 100.0,
    "mem_util_mean_pct": 0.0,
    "memory_used_max": 3221225472,
    "memory_total": 85899345920,
    "sm_clock_mean_mhz": 0.0,
    "power_mean_w": 0.0
  },
  "memory": {
    "device_peak_allocated": 1073741824,
    "device_peak_reserved": 1610612736,
    "device_steady_peak_allocated": 536870912,
    "device_total": 85899345920,
    "host_peak_rss": 524288000
  },
  "cpu": {
    "source": "run",
    "process_cpu_s": 0.4,
    "main_thread_pct": 95.0,
    "workers_pct_mean": 37.5,
    "threads": [
      {
        "name": "main",
        "tid": 1000,
        "cpu_s": 0.2,
        "busy_pct": 95.0
      },
      {
        "name": "loader-0",
        "tid": 1001,
        "cpu_s": 0.1,
        "busy_pct": 50.0
      },
      {
        "name": "loader-1",
        "tid": 1002,
        "cpu_s": 0.05,
        "busy_pct": 25.0
      }
    ]
  },
  "loader": {
    "present": true,
    "batches": 12,
    "wait_ms_per_batch": 1.0,
    "worker_busy_pct": [
      50.0,
      25.0
    ],
    "worker_busy_pct_mean": 37.5,
    "cpu_augment_share": 0.0,
    "h2d_bytes_per_batch": 1000000,
    "h2d_ms_per_batch": 0.5,
    "h2d_issue_ms_per_batch": 0.02,
    "h2d_gb_per_s": 2.0,
    "augment_ms_per_batch": 0.19999999999999998,
    "skipped_samples": 0
  },
  "verdict": {
    "kind": "host/launch-bound",
    "rule": "R5 host",
    "evidence": "GPU busy 76% of the step (CUDA events), NVML utilization 74% (the lower figure is used) although data wait 5%, H2D copies 2% of the step 20.00 ms; the device finished each step 1.00 ms after the host issued it (it waits for the host); the host spent 18.00 ms/step issuing forward+backward+optimizer; device memory peak 1.50 GiB of 80.00 GiB; the step already runs as a CUDA graph (640 nodes)",
    "suggestion": "--batch 256"
  }
}
)json";

RunReport golden_report() {
  RunMeasurements m = recorded_measurements();
  m.comm = CommTimes{true, 2.0, 0.5, 1.5};
  m.graphs = GraphReport{"auto", true, "", 3, 97, 4, 640, 2, ""};
  m.device_memory_steady_peak_allocated = int64_t{1} << 29;
  m.loader->h2d_issue_ms_per_batch = 0.02;
  RunReport r = build_report(recorded_config(), m);
  r.created_utc = "2025-06-01T12:00:00Z";
  r.rank_step_ms = {20.0, 25.5};
  r.algorithm_searches = 21;
  r.algorithm_search_seconds = 0.75;
  r.algorithms_restored = 3;
  r.algorithm_store = "/home/user/.cache/liftoff/conv-algorithms-v1-GPU.tsv";
  return r;
}

// Equal structure, strings and integers; floating-point figures to rounding (the arithmetic may contract
// differently on another machine).
void expect_same_json(const json& a, const json& b, const std::string& path = "") {
  if (a.is_number_float() || b.is_number_float()) {
    ASSERT_TRUE(a.is_number() && b.is_number()) << path;
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-12 * std::max(1.0, std::abs(b.get<double>()))) << path;
  } else if (a.is_object() && b.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << path;
    for (auto it = b.begin(); it != b.end(); ++it) {
      ASSERT_TRUE(a.contains(it.key())) << path + "." + it.key();
      expect_same_json(a.at(it.key()), it.value(), path + "." + it.key());
    }
  } else if (a.is_array() && b.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << path;
    for (size_t i = 0; i < a.size(); ++i) expect_same_json(a[i], b[i], path + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(a, b) << path;
  }
}

TEST(ReportJson, TheFileIsByteForByteTheSchemaOne) {
  // The writer: the same values give the same bytes, in the same order.
  EXPECT_EQ(RunReport::from_json(kGolden, "golden.json").to_json(), kGolden);
  // Assembly and verdict: the same measurements give the same report.
  expect_same_json(json::parse(golden_report().to_json()), json::parse(kGolden));
}

TEST(ReportJson, ReportsWrittenBeforeAFieldExistedStillRead) {
  json j = json::parse(kGolden);
  j.erase("ranks");
  j.erase("cuda_graphs");
  j["memory"].erase("device_steady_peak_allocated");
  j["loader"].erase("h2d_issue_ms_per_batch");
  j["steps"].erase("throughput_s");
  j.erase("startup");
  RunReport r = RunReport::from_json(j.dump(), "old.json");
  EXPECT_EQ(r.algorithm_searches, 0);
  EXPECT_EQ(r.throughput_seconds, 0.0);
  EXPECT_EQ(r.images_per_second, 6400.0);
  EXPECT_TRUE(r.rank_step_ms.empty());
  EXPECT_FALSE(r.graphs.used);
  EXPECT_EQ(r.graphs.mode, "off");
  EXPECT_FALSE(r.device_memory_steady_peak_allocated.has_value());
  EXPECT_FALSE(r.loader.h2d_issue_ms_per_batch.has_value());
  // Graphs from before concurrent micro-batches: one stream.
  j = json::parse(kGolden);
  j["cuda_graphs"].erase("streams");
  j["cuda_graphs"].erase("streams_reason");
  r = RunReport::from_json(j.dump(), "old.json");
  EXPECT_EQ(r.graphs.nodes, 640);
  EXPECT_EQ(r.graphs.streams, 1);
}

TEST(ReportJson, ErrorsNameTheFileAndTheJsonPath) {
  const std::string prefix = "run.json: not a valid liftoff.report/1 report: ";
  json j = json::parse(kGolden);
  j["steps"]["step_ms"].erase("mean");
  EXPECT_EQ(from_json_error(j.dump()), prefix + "missing field 'steps.step_ms.mean'");
  j = json::parse(kGolden);
  j["config"]["workers"] = 2.5;
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'config.workers' must be an integer");
  j = json::parse(kGolden);
  j["device"]["busy_pct"] = "76";
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'device.busy_pct' must be a number or null");
  j = json::parse(kGolden);
  j["memory"]["host_peak_rss"] = 1.5;
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'memory.host_peak_rss' must be an integer or null");
  j = json::parse(kGolden);
  j["cpu"]["threads"][1].erase("tid");
  EXPECT_EQ(from_json_error(j.dump()), prefix + "missing field 'cpu.threads[].tid'");
  j["cpu"]["threads"] = json::object();
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'cpu.threads' must be an array");
  j = json::parse(kGolden);
  j["loader"]["worker_busy_pct"].push_back("busy");
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'loader.worker_busy_pct' must hold numbers");
  j = json::parse(kGolden);
  j["cuda_graphs"]["used"] = 1;
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'cuda_graphs.used' must be true or false");
  j = json::parse(kGolden);
  j["ranks"]["step_ms"] = json::array({20.0, "slow"});
  EXPECT_EQ(from_json_error(j.dump()), prefix + "field 'ranks.step_ms' must hold numbers");
  j = json::parse(kGolden);
  j.erase("verdict");
  EXPECT_EQ(from_json_error(j.dump()), prefix + "missing field 'verdict'");
  EXPECT_EQ(from_json_error("[1, 2]"), prefix + "missing field 'schema'");
  EXPECT_EQ(from_json_error("{\"schema\": 1}"), prefix + "field 'schema' must be a string");
}

TEST(ReportJson, NvmlNullsReadAsZeroAndWriteBackAsNull) {
  json j = json::parse(kGolden);
  j["nvml"]["available"] = false;
  for (const char* k : {"util_mean_pct", "util_max_pct", "mem_util_mean_pct", "memory_used_max",
                        "memory_total", "sm_clock_mean_mhz", "power_mean_w"})
    j["nvml"][k] = nullptr;
  const RunReport r = RunReport::from_json(j.dump(), "run.json");
  EXPECT_EQ(r.gpu.util_mean_pct, 0.0);
  EXPECT_EQ(r.gpu.memory_total, 0u);
  EXPECT_EQ(json::parse(r.to_json()).at("nvml"), j.at("nvml"));
  // Sampled figures keep their types: memory in bytes as integers.
  EXPECT_TRUE(json::parse(kGolden).at("nvml").at("memory_total").is_number_integer());
}

}  // namespace
}  // namespace liftoff
