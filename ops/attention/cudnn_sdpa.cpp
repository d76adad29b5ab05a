#include "ops/attention/cudnn_sdpa.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "ops/attention/cudnn_sdpa_graph.h"
#include "ops/common/broadcast.h"
#include "ops/views/views.h"
#include "runtime/autograd.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn_loader.h"

namespace liftoff {

namespace {

namespace sdpa = cuda::sdpa;
constexpr const char* kOp = "scaled_dot_product_attention";
// cuDNN 9.16: the first 9.x whose backward needs no padding-mask workaround for key lengths that are not a
// multiple of 128 (cudnn-frontend adds one up to 9.15).
constexpr size_t kMinCudnnVersion = 91600;

std::atomic<int64_t> g_executions{0};
std::mutex g_failures_mutex;
std::string g_failures;

bool log_plans() {
  return config::get_bool(config::Knob::cudnn_log).value_or(false);
}

std::string problem_text(const sdpa::Problem& p, sdpa::Direction direction) {
  return str_cat(sdpa::direction_name(direction), " b ", p.b, " h ", p.h, " L ", p.l, " S ", p.s, " D ", p.d,
                 " ", dtype_name(p.dtype), p.causal ? " causal" : "", " q strides [", p.q_strides[0], ", ",
                 p.q_strides[1], ", ", p.q_strides[2], "]");
}

// One device's plans: built on first use of a (problem, direction), kept for the context's life; a problem
// whose plan did not build is kept as null, so it is tried once.
class SdpaPlanCache final : public cuda::DeviceExtension {
 public:
  // The plan, or null when cuDNN rejects the problem or it is first met inside a graph capture (not cached:
  // the next eager call builds it).
  std::shared_ptr<sdpa::Plan> get(sdpa::Direction direction, const sdpa::Problem& p, int device) {
    const Key key = key_of(direction, p);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    if (graph_capture_active()) {
      if (log_plans()) {
        std::fprintf(stderr,
                     "liftoff cudnn: sdpa %s: first met inside a CUDA graph capture; Liftoff's kernels "
                     "run it there\n",
                     problem_text(p, direction).c_str());
      }
      return nullptr;
    }
    sdpa::BuildResult built = sdpa::build_plan(direction, cuda::cudnn_handle(device), p);
    if (!built.plan) record_failure(str_cat("sdpa ", problem_text(p, direction), ": ", built.error));
    if (built.plan && log_plans()) {
      std::fprintf(stderr, "liftoff cudnn: sdpa %s: %s\n", problem_text(p, direction).c_str(),
                   sdpa::describe(*built.plan).c_str());
    }
    return plans_.emplace(key, std::move(built.plan)).first->second;
  }

 private:
  using Key = std::tuple<sdpa::Direction, DType, std::array<int64_t, 17>, bool, uint64_t>;
  static Key key_of(sdpa::Direction direction, const sdpa::Problem& p) {
    std::array<int64_t, 17> dims = {p.b, p.h, p.l, p.s, p.d};
    for (int i = 0; i < 4; ++i) {
      dims[static_cast<size_t>(5 + i)] = p.q_strides[i];
      dims[static_cast<size_t>(9 + i)] = p.k_strides[i];
      dims[static_cast<size_t>(13 + i)] = p.v_strides[i];
    }
    uint64_t scale_bits = 0;
    std::memcpy(&scale_bits, &p.scale, sizeof(scale_bits));
    return {direction, p.dtype, dims, p.causal, scale_bits};
  }

  static void record_failure(const std::string& line) {
    if (log_plans()) std::fprintf(stderr, "liftoff cudnn: %s; Liftoff's kernels run it\n", line.c_str());
    std::lock_guard<std::mutex> lock(g_failures_mutex);
    g_failures += line + "\n";
  }

  std::mutex mutex_;
  std::map<Key, std::shared_ptr<sdpa::Plan>> plans_;
};

// The batch dims [begin, end) of a tensor as one dim: its size and stride, or false when their strides do not
// nest (a permute that interleaves them). Size-1 dims do not count; a group of them gets `unit_stride`.
bool collapse(const Tensor& t, const Shape& batch, size_t begin, size_t end, int64_t unit_stride,
              int64_t* size, int64_t* stride) {
  const int64_t skipped = static_cast<int64_t>(batch.size()) - (t.dim() - 2);  // leading dims t lacks
  *size = 1;
  *stride = unit_stride;
  int64_t expected = -1;  // the stride the next non-1 dim must have
  for (size_t d = end; d-- > begin;) {
    if (batch[d] == 1) continue;
    const int64_t st = t.strides()[static_cast<size_t>(static_cast<int64_t>(d) - skipped)];
    if (expected >= 0 && st != expected) return false;
    if (expected < 0) *stride = st;
    expected = st * batch[d];
    *size *= batch[d];
  }
  return true;
}

// cuDNN's [b, h, rows, d] strides of t when the batch dims before `split` collapse to b and the rest to h.
bool strides_4d(const Tensor& t, const Shape& batch, size_t split, int64_t out[4]) {
  const int64_t rows = t.size(-2), row_stride = t.strides()[static_cast<size_t>(t.dim() - 2)];
  int64_t h = 1, b = 1;
  if (!collapse(t, batch, split, batch.size(), rows * row_stride, &h, &out[1])) return false;
  if (!collapse(t, batch, 0, split, h * out[1], &b, &out[0])) return false;
  out[2] = row_stride;
  out[3] = t.strides().back();
  return true;
}

// Reads with 16-byte vectors: the last dim dense, the other strides multiples of 8 elements, data aligned;
// every batch dim its own (not broadcast, not expanded with stride 0).
bool cudnn_ready(const Tensor& t, const Shape& batch) {
  if (t.strides().back() != 1 || reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) {
    if (t.shape()[static_cast<size_t>(d)] > 1 && t.strides()[static_cast<size_t>(d)] % 8 != 0) return false;
  }
  const int64_t skipped = static_cast<int64_t>(batch.size()) - (t.dim() - 2);
  for (size_t d = 0; d < batch.size(); ++d) {
    const int64_t own = static_cast<int64_t>(d) - skipped;
    const int64_t size = own < 0 ? 1 : t.shape()[static_cast<size_t>(own)];
    if (size != batch[d]) return false;
    // An expanded operand (k.expand() of one head for every head: stride 0) is copied too.
    if (size > 1 && t.strides()[static_cast<size_t>(own)] == 0) return false;
  }
  return true;
}

// Broadcast or misaligned operands become dense [batch..., rows, E] copies.
Tensor ready_copy(const Tensor& t, const Shape& batch) {
  if (cudnn_ready(t, batch)) return t;
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  return expand(t, full).clone();
}

struct Operands {
  Tensor q, k, v;
  sdpa::Problem problem;
};

Operands operands_of(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Shape& batch,
                     double scale, bool is_causal) {
  Operands o{ready_copy(q_in, batch), ready_copy(k_in, batch), ready_copy(v_in, batch), {}};
  sdpa::Problem& p = o.problem;
  p.dtype = o.q.dtype();
  p.l = o.q.size(-2);
  p.s = o.k.size(-2);
  p.d = o.q.size(-1);
  p.causal = is_causal;
  p.scale = scale;
  // Heads are the innermost batch dims that nest: try the split with b = all but the last batch dim first.
  const auto fits = [&](size_t split) {
    return strides_4d(o.q, batch, split, p.q_strides) && strides_4d(o.k, batch, split, p.k_strides) &&
           strides_4d(o.v, batch, split, p.v_strides);
  };
  size_t split = batch.empty() ? 0 : batch.size() - 1;
  bool found = fits(split);
  for (size_t s = split; !found && s-- > 0;) found = fits(split = s);
  if (!found) {  // permuted so that no split nests: dense copies always do
    o.q = o.q.clone();
    o.k = o.k.clone();
    o.v = o.v.clone();
    split = batch.empty() ? 0 : batch.size() - 1;
    LIFTOFF_CHECK(fits(split), ValueError, kOp, ": internal: dense operands do not map to cuDNN's layout");
  }
  p.b = 1;
  for (size_t d = 0; d < split; ++d) p.b *= batch[d];
  p.h = 1;
  for (size_t d = split; d < batch.size(); ++d) p.h *= batch[d];
  return o;
}

Shape with_rows(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

void* workspace_for(const sdpa::Plan& plan, Device device, Tensor* holder) {
  const size_t bytes = sdpa::workspace_bytes(plan);
  if (bytes == 0) return nullptr;
  *holder = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, device);
  return holder->raw_data();
}

// A contiguous, 16-byte aligned copy of the incoming gradient (dense like the output it matches).
Tensor dense_aligned(const Tensor& t) {
  const Tensor c = t.contiguous();
  return reinterpret_cast<uintptr_t>(c.raw_data()) % 16 == 0 ? c : c.clone();
}

// dQ [batch..., L, E], dK and dV [batch..., S, E] (full batch: the caller sums broadcast dims).
std::vector<Tensor> run_backward(const Operands& o, const sdpa::Plan& plan, const Tensor& out,
                                 const Tensor& stats, const Shape& batch, const Tensor& grad_out) {
  const sdpa::Problem& p = o.problem;
  const Device device = o.q.device();
  const Tensor g = dense_aligned(grad_out.to(p.dtype));
  const Tensor gq = Tensor::empty(with_rows(batch, p.l, p.d), p.dtype, device);
  const Tensor gk = Tensor::empty(with_rows(batch, p.s, p.d), p.dtype, device);
  const Tensor gv = Tensor::empty(with_rows(batch, p.s, p.d), p.dtype, device);
  const Tensor softmax_sum = Tensor::empty({p.b * p.h * p.l}, DType::f32, device);
  const Tensor gq_accum = Tensor::empty({p.b * p.h * p.l * p.d}, DType::f32, device);
  Tensor workspace;
  void* ws = workspace_for(plan, device, &workspace);
  cuda::DeviceGuard guard(device.index);
  sdpa::execute(cuda::cudnn_handle(device.index), plan,
                {{sdpa::kQ, o.q.raw_data()},
                 {sdpa::kK, o.k.raw_data()},
                 {sdpa::kV, o.v.raw_data()},
                 {sdpa::kO, out.raw_data()},
                 {sdpa::kGradO, g.raw_data()},
                 {sdpa::kStats, stats.raw_data()},
                 {sdpa::kGradQ, gq.raw_data()},
                 {sdpa::kGradK, gk.raw_data()},
                 {sdpa::kGradV, gv.raw_data()},
                 {sdpa::kSoftmaxSum, softmax_sum.raw_data()},
                 {sdpa::kGradQAccum, gq_accum.raw_data()}},
                ws);
  g_executions.fetch_add(1, std::memory_order_relaxed);
  return {gq, gk, gv};
}

}  // namespace

bool cudnn_sdpa_available() {
  static const bool available = cuda::cudnn_loaded() && cudnnGetVersion() >= kMinCudnnVersion;
  return available;
}

int64_t cudnn_sdpa_executions() {
  return g_executions.load(std::memory_order_relaxed);
}

std::string cudnn_sdpa_failures() {
  std::lock_guard<std::mutex> lock(g_failures_mutex);
  return g_failures;
}

Tensor cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double scale,
                       bool is_causal) {
  const Device device = q.device();
  cuda::DeviceGuard guard(device.index);  // plans are built and run on the inputs' device
  const Operands o = operands_of(q.detach(), k.detach(), v.detach(), batch, scale, is_causal);
  const bool training = should_record({q, k, v});
  auto& cache = cuda::device_extension<SdpaPlanCache>(device.index);
  const std::shared_ptr<sdpa::Plan> forward = cache.get(sdpa::Direction::forward, o.problem, device.index);
  // A call that records for autograd needs both plans before it commits to cuDNN.
  const std::shared_ptr<sdpa::Plan> backward =
      forward && training ? cache.get(sdpa::Direction::backward, o.problem, device.index) : nullptr;
  if (!forward || (training && !backward)) return Tensor();

  const sdpa::Problem& p = o.problem;
  const Tensor out = Tensor::empty(with_rows(batch, p.l, p.d), p.dtype, device);
  const Tensor stats = Tensor::empty({p.b * p.h * p.l}, DType::f32, device);  // [b, h, L, 1]
  Tensor workspace;
  void* ws = workspace_for(*forward, device, &workspace);
  sdpa::execute(cuda::cudnn_handle(device.index), *forward,
                {{sdpa::kQ, o.q.raw_data()},
                 {sdpa::kK, o.k.raw_data()},
                 {sdpa::kV, o.v.raw_data()},
                 {sdpa::kO, out.raw_data()},
                 {sdpa::kStats, stats.raw_data()}},
                ws);
  g_executions.fetch_add(1, std::memory_order_relaxed);
  if (!training) return out;
  record(out, kOp, {q, k, v},
         [o, backward, batch, out_saved = out.detach(), stats,
          shapes = std::vector<Shape>{q.shape(), k.shape(), v.shape()}](const Tensor& gy,
                                                                        const NeedsGrad& needs) {
           const std::vector<Tensor> grads = run_backward(o, *backward, out_saved, stats, batch, gy);
           return std::vector<Tensor>{needs[0] ? sum_to_shape(grads[0], shapes[0]) : Tensor(),
                                      needs[1] ? sum_to_shape(grads[1], shapes[1]) : Tensor(),
                                      needs[2] ? sum_to_shape(grads[2], shapes[2]) : Tensor()};
         });
  return out;
}

}  // namespace liftoff
