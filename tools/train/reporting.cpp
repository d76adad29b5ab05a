#include "tools/train/reporting.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "runtime/error.h"
#include "runtime/profile/algorithm_search.h"
#include "tools/train/format.h"

namespace liftoff::tools {

namespace {

// DDP times each bucket in eager steps; captured steps are timed by the profiler's allreduce marks instead
// (the report falls back to them when no CommTimes are given).
std::optional<CommTimes> comm_times(const TrainSetup& s) {
  if (!s.ddp || s.trainer->graph_status().graph_steps != 0) return std::nullopt;
  const DDPStats st = s.ddp->stats();
  const DDPStats& w = s.ddp_at_warmup;
  const int64_t steps = st.timed_steps - w.timed_steps;
  if (steps <= 0) return std::nullopt;
  const double per = 1.0 / static_cast<double>(steps);
  return CommTimes{st.device_timed, (st.comm_ms - w.comm_ms) * per, (st.exposed_ms - w.exposed_ms) * per,
                   (st.overlapped_ms - w.overlapped_ms) * per};
}

GraphReport graph_report(const GraphStatus& gs) {
  GraphReport graphs;
  graphs.mode = graph_mode_name(gs.mode);
  graphs.used = gs.used;
  graphs.reason = gs.reason;
  graphs.captured_at_step = gs.captured_at_step;
  graphs.graph_steps = gs.graph_steps;
  graphs.eager_steps = gs.eager_steps;
  graphs.nodes = gs.nodes;
  graphs.streams = gs.streams;
  graphs.streams_reason = gs.streams_reason;
  return graphs;
}

void print_ddp_summary(const Flags& f, const TrainSetup& s, const RunReport& report) {
  const DDPStats st = s.ddp->stats();
  const GraphStatus& gs = s.trainer->graph_status();
  std::printf(
      "ddp: %lld gradient syncs for %lld optimizer steps x %lld micro-batches, %lld bucket all-reduces "
      "(%lld buckets), %.1f MB reduced",
      static_cast<long long>(st.sync_steps), static_cast<long long>(s.trainer->global_step()),
      static_cast<long long>(f.accum), static_cast<long long>(st.all_reduce_calls),
      static_cast<long long>(s.ddp->buckets().size()), static_cast<double>(st.bytes_reduced) / 1e6);
  if (gs.graph_steps > 0 && report.allreduce_exposed_ms && report.allreduce_overlapped_ms) {
    const double total = *report.allreduce_exposed_ms + *report.allreduce_overlapped_ms;
    std::printf(
        "; all-reduce %.3f ms/step from the first bucket's start to the last one's end (captured steps, "
        "profiler marks), %.3f ms exposed, %.3f ms overlapped with backward (%.0f%% hidden)",
        total, *report.allreduce_exposed_ms, *report.allreduce_overlapped_ms,
        total > 0 ? 100.0 * *report.allreduce_overlapped_ms / total : 0.0);
  } else if (gs.graph_steps > 0) {
    std::printf("; all-reduce timing of the captured steps comes from the profiler (--profile)");
  } else if (st.device_timed && st.timed_steps > 0) {
    const double per = 1.0 / static_cast<double>(st.timed_steps);
    std::printf(
        "; all-reduce %.3f ms/step on the comm stream, %.3f ms exposed, %.3f ms overlapped with backward "
        "(%.0f%% hidden)",
        st.comm_ms * per, st.exposed_ms * per, st.overlapped_ms * per,
        st.comm_ms > 0 ? 100.0 * st.overlapped_ms / st.comm_ms : 0.0);
  }
  std::printf("\n");
}

// The run's one throughput figure for the done line: the report's (images over the device's time on the
// measured steps) when profiled, else the epoch loop's (wall time between device synchronisations after the
// warm-up). Both leave out the warm-up and evaluation; "" when neither was measured.
std::string steady_text(const Flags& f, const RunReport& report, const LoopResult& loop, double world) {
  if (f.profile && report.steps_measured > 0 && report.images_per_second > 0) {
    const std::string after = report.warmup_steps_excluded > 0
                                  ? str_cat("after the first ", report.warmup_steps_excluded, " steps")
                                  : str_cat("all ", report.steps_measured, " steps, none after the ",
                                            f.timing_warmup, "-step warm-up");
    return "; steady state " + fmt("%.1f", world * report.images_per_second) + " images/s (" + after +
           (world > 1 ? str_cat(", ", world, " ranks") : std::string()) + "; the report's throughput)";
  }
  if (!loop.steady_started || loop.steady_seconds <= 0) return "";
  return "; steady state " +
         fmt("%.1f", world * static_cast<double>(loop.steady_images) / loop.steady_seconds) +
         " images/s (after the first " + std::to_string(f.timing_warmup) + " steps)";
}

}  // namespace

RunReport collect_report(const Flags& f, TrainSetup& s) {
  const LoaderStats loader_stats = s.data.train_stats();
  if (s.rank0 && s.data.decode_summary) std::printf("%s\n", s.data.decode_summary().c_str());
  const GraphReport graphs = graph_report(s.trainer->graph_status());
  RunReport report = f.profile ? s.monitor->finish(&loader_stats, comm_times(s), graphs) : RunReport{};
  report.config.model_flops_per_image = s.trainer->model_flops_per_image();
  if (s.data.skips) s.data.skips->fill(report.loader);
  if (!f.profile) report.graphs = graphs;
  const AlgorithmSearchTotals searches = algorithm_search_totals();
  report.algorithm_searches = searches.searches;
  report.algorithm_search_seconds = searches.seconds;
  report.algorithms_restored = searches.restored;
  report.algorithm_store = searches.store;
  // Every rank's step time on rank 0 (a collective: all ranks profile or none do, since flags are shared).
  if (s.group && f.profile) report.rank_step_ms = all_gather_value(*s.group, report.step_ms_mean);
  return report;
}

void print_parameter_checksum(const TrainSetup& s) {
  double sum = 0.0, abs_sum = 0.0;
  for (const Tensor& p : s.model->parameters()) {
    for (double v : p.to_vector<double>()) {
      sum += v;
      abs_sum += std::abs(v);
    }
  }
  std::printf("rank %d: parameter checksum %.17g / %.17g\n", s.placement.env.rank, sum, abs_sum);
  std::fflush(stdout);
  s.group->barrier();
}

void print_run_summary(const Flags& f, TrainSetup& s, const RunReport& report, const LoopResult& loop) {
  if (s.ddp) print_ddp_summary(f, s, report);
  Trainer& trainer = *s.trainer;
  const GraphStatus& gs = trainer.graph_status();
  const double world = static_cast<double>(s.placement.env.world_size);
  const std::string steady = steady_text(f, report, loop, world);
  if (f.profile) std::printf("%s", report.render_table().c_str());
  if (!f.profile && s.device.is_cuda()) {  // the table says it otherwise
    std::printf(
        "CUDA graphs: %s\n",
        gs.used ? str_cat(gs.graph_steps, " steps replayed, ", gs.eager_steps, " eager (captured at step ",
                          gs.captured_at_step, ")")
                      .c_str()
                : str_cat("not used (", gs.reason.empty() ? "no step was captured" : gs.reason, ")").c_str());
  }
  if (trainer.scaler().enabled()) {
    std::printf("amp: %s, loss scale %g (%s), %lld optimizer steps skipped for inf/NaN gradients\n",
                f.amp.c_str(), trainer.scaler().current_scale(), f.loss_scale > 0 ? "static" : "dynamic",
                static_cast<long long>(trainer.scaler().skipped_steps().item()));
  }
  if (f.profile && !f.report.empty()) report.write_json(f.report);
  if (f.profile && !f.trace.empty())
    write_trace(f.trace, s.monitor->profiler(), &s.monitor->sampler(), s.monitor->config());
  std::printf("done: %lld optimizer steps, %lld images in %.1f s of training (warm-up included)%s%s\n",
              static_cast<long long>(trainer.global_step()),
              static_cast<long long>(static_cast<double>(loop.train_images) * world), loop.train_seconds,
              steady.c_str(),
              loop.last_accuracy >= 0
                  ? ("; final test accuracy " + fmt("%.2f", 100.0 * loop.last_accuracy) + "%").c_str()
                  : "");
}

}  // namespace liftoff::tools
