// The large-GEMM search (gemm_search.h). Per device: a cuBLASLt handle, the large cuBLAS handle's workspace
// (LIFTOFF_CUBLAS_WORKSPACE_MB; the split-K kernels need it), and the choice per shape.
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "ops/matmul/gemm_search.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublaslt_loader.h"
#include "runtime/determinism.h"

namespace liftoff::cuda {

namespace {

std::atomic<int64_t> g_searches{0};  // shapes searched, all devices (gemm_searches())

constexpr int kCandidates = 8;  // heuristic candidates timed per shape
constexpr int kTimedRuns = 5;   // per candidate and round, after one warm-up run
constexpr int kRounds = 2;      // rounds over all candidates (drift hits them alike); each keeps its best

// The largest power of two (<= 256) dividing the address: the kernels a pointer admits depend on it.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

using ShapeKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

ShapeKey key_of(const GemmCall& g) {
  return {static_cast<int>(g.data_type),
          static_cast<int>(g.trans_a),
          static_cast<int>(g.trans_b),
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldc,
          g.stride_a,
          g.stride_b,
          g.stride_c,
          g.batch,
          alignment_of(g.a),
          alignment_of(g.b),
          alignment_of(g.c)};
}

// The descriptors of one shape, kept with its choice.
struct ShapePlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  bool found = false;  // false: no candidate; cuBLAS's own pick serves this shape
  cublasLtMatmulAlgo_t algo{};
  ShapePlan() = default;
  ShapePlan(const ShapePlan&) = delete;
  ShapePlan& operator=(const ShapePlan&) = delete;
  ~ShapePlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct GemmSearchState : DeviceExtension {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;  // the large-GEMM cuBLAS handle's (lane 0's stream, the same work queue)
  size_t workspace_bytes = 0;
  std::map<ShapeKey, std::unique_ptr<ShapePlan>> plans;
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  LIFTOFF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                  static_cast<uint64_t>(cols), ld));
  const auto count = static_cast<int32_t>(batch);
  LIFTOFF_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  LIFTOFF_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                        &stride, sizeof stride));
  return layout;
}

void describe(const GemmCall& g, ShapePlan& plan) {
  LIFTOFF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LIFTOFF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &g.trans_a, sizeof g.trans_a));
  LIFTOFF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &g.trans_b, sizeof g.trans_b));
  // Stored shapes: op(A) is m x k, so A is k x m when transposed.
  const bool ta = g.trans_a != CUBLAS_OP_N, tb = g.trans_b != CUBLAS_OP_N;
  plan.a = make_layout(g.data_type, ta ? g.k : g.m, ta ? g.m : g.k, g.lda, g.batch, g.stride_a);
  plan.b = make_layout(g.data_type, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb, g.batch, g.stride_b);
  plan.c = make_layout(g.data_type, g.m, g.n, g.ldc, g.batch, g.stride_c);
}

}  // namespace

cublasStatus_t cublas_own_gemm(const GemmCall& g) {
  const float beta = 0.0f;
  return cublasGemmStridedBatchedEx(
      cublas_large_gemm_handle(g.device), g.trans_a, g.trans_b, static_cast<int>(g.m), static_cast<int>(g.n),
      static_cast<int>(g.k), &g.alpha, g.a, g.data_type, static_cast<int>(g.lda), g.stride_a, g.b,
      g.data_type, static_cast<int>(g.ldb), g.stride_b, &beta, g.c, g.data_type, static_cast<int>(g.ldc),
      g.stride_c, static_cast<int>(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

namespace {

cublasStatus_t run(const GemmSearchState& s, const ShapePlan& plan, const GemmCall& g,
                   const cublasLtMatmulAlgo_t& algo) {
  const float beta = 0.0f;
  return cublasLtMatmul(s.handle, plan.desc, &g.alpha, g.a, plan.a, g.b, plan.b, &beta, g.c, plan.c, g.c,
                        plan.c, &algo, s.workspace, s.workspace_bytes, g.stream);
}

// The search's two timing events, destroyed however the search ends.
struct TimingEvents {
  cudaEvent_t start = nullptr, stop = nullptr;
  TimingEvents() {
    LIFTOFF_CUDA_CHECK(cudaEventCreate(&start));
    LIFTOFF_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~TimingEvents() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
};

// Milliseconds of kTimedRuns runs after one warm-up (a kernel's first launch loads it); < 0 when a run fails
// (the candidate does not run here and is left out).
template <class Run>
float time_runs(const GemmCall& g, cudaEvent_t start, cudaEvent_t stop, Run&& run_once) {
  if (run_once() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  LIFTOFF_CUDA_CHECK(cudaEventRecord(start, g.stream));
  for (int r = 0; r < kTimedRuns; ++r) {
    if (run_once() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  }
  LIFTOFF_CUDA_CHECK(cudaEventRecord(stop, g.stream));
  LIFTOFF_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  LIFTOFF_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

// Times cuBLAS's own pick and each of cuBLASLt's heuristic candidates on the call's operands (its output is
// overwritten by the call after) and keeps the fastest. A host wait, once per shape, outside any capture.
void search(GemmSearchState& s, ShapePlan& plan, const GemmCall& g) {
  cublasLtMatmulPreference_t pref = nullptr;
  LIFTOFF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t bytes = s.workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
  const uint32_t align_a = alignment_of(g.a), align_b = alignment_of(g.b), align_c = alignment_of(g.c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                       sizeof align_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                       sizeof align_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                       sizeof align_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                       sizeof align_c);
  std::vector<cublasLtMatmulHeuristicResult_t> results(kCandidates);
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      s.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, kCandidates, results.data(), &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || returned <= 0) return;  // cuBLAS's own pick serves the shape
  const TimingEvents events;
  const cudaEvent_t start = events.start, stop = events.stop;
  // Candidate 0 is cuBLAS's own pick; a candidate whose warm-up fails is out (< 0).
  std::vector<float> best(static_cast<size_t>(returned) + 1, -1.0f);
  std::vector<bool> out(best.size(), false);
  for (int i = 0; i < returned; ++i)
    out[static_cast<size_t>(i) + 1] = results[static_cast<size_t>(i)].state != CUBLAS_STATUS_SUCCESS;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t c = 0; c < best.size(); ++c) {
      if (out[c]) continue;
      const float ms = c == 0
                           ? time_runs(g, start, stop, [&] { return cublas_own_gemm(g); })
                           : time_runs(g, start, stop, [&] { return run(s, plan, g, results[c - 1].algo); });
      if (ms < 0.0f) {
        out[c] = true;
      } else if (best[c] < 0.0f || ms < best[c]) {
        best[c] = ms;
      }
    }
  }
  size_t fastest = 0;
  for (size_t c = 1; c < best.size(); ++c) {
    if (!out[c] && best[c] >= 0.0f && (out[fastest] || best[fastest] < 0.0f || best[c] < best[fastest]))
      fastest = c;
  }
  if (fastest > 0) {
    plan.algo = results[fastest - 1].algo;
    plan.found = true;
  }
}

bool applies(const GemmCall& g) {
  if (!config::get_bool(config::Knob::gemm_search).value_or(true)) return false;
  if (deterministic_algorithms()) return false;  // a timed choice may differ from run to run
  if (active_lane(g.device) != 0) return false;  // one workspace: lane 0's stream only
  if (g.data_type != CUDA_R_32F && g.data_type != CUDA_R_16F && g.data_type != CUDA_R_16BF) return false;
  return cublaslt_loaded();
}

}  // namespace

bool searched_gemm(const GemmCall& g) {
  if (!applies(g)) return false;
  GemmSearchState& s = device_extension<GemmSearchState>(g.device);
  std::lock_guard<std::mutex> lock(s.mutex);
  const ShapeKey key = key_of(g);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    // Handle, workspace and the timing search cannot be captured: such a shape keeps cuBLAS's pick there.
    if (graph_capture_active()) return false;
    if (s.handle == nullptr) {
      // The workspace first: a failed allocation leaves no half-made state behind.
      s.workspace = cublas_large_gemm_workspace(g.device, &s.workspace_bytes);
      LIFTOFF_CUBLAS_CHECK(cublasLtCreate(&s.handle));
    }
    auto plan = std::make_unique<ShapePlan>();
    describe(g, *plan);
    search(s, *plan, g);
    g_searches.fetch_add(1, std::memory_order_relaxed);
    it = s.plans.emplace(key, std::move(plan)).first;
  }
  const ShapePlan& plan = *it->second;
  if (!plan.found) return false;
  LIFTOFF_CUBLAS_CHECK(run(s, plan, g, plan.algo));
  return true;
}

int64_t gemm_searches() {
  return g_searches.load(std::memory_order_relaxed);
}

}  // namespace liftoff::cuda
