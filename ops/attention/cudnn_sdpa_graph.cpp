#include "ops/attention/cudnn_sdpa_graph.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <utility>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_backend.h"
#include "runtime/error.h"

namespace liftoff::cuda::sdpa {

namespace {

using Desc = BackendDesc;
constexpr int64_t kAlignment = 16;
constexpr int64_t kFirstInternalUid = 100;  // scalars and virtual tensors

// Sizes and strides (elements) of one 4-D tensor.
struct Dims {
  std::array<int64_t, 4> size;
  std::array<int64_t, 4> stride;
};

Dims dense(int64_t a, int64_t b, int64_t c, int64_t d) {
  return {{a, b, c, d}, {b * c * d, c * d, d, 1}};
}

Dims strided(int64_t a, int64_t b, int64_t c, int64_t d, const int64_t* strides) {
  return {{a, b, c, d}, {strides[0], strides[1], strides[2], strides[3]}};
}

// The last two dims swapped (a transposed view of the same memory).
Dims transposed(const Dims& x) {
  Dims t = x;
  std::swap(t.size[2], t.size[3]);
  std::swap(t.stride[2], t.stride[3]);
  return t;
}

cudnnDataType_t io_type(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw DTypeError(str_cat("scaled_dot_product_attention (cuDNN): dtype ", dtype_name(dtype),
                               " is not supported (f16, bf16)"));
  }
}

}  // namespace

// The graph's descriptors (tensors, operations, the operation graph) and its by-value scalars, alive as long
// as a plan made from it.
struct GraphParts {
  std::vector<Desc> tensors;
  std::vector<Desc> keep;  // operation descriptors and their settings
  std::vector<cudnnBackendDescriptor_t> ops;
  std::vector<std::pair<int64_t, float>> scalars;  // uid, value (the variant pack points at the value)
  std::unique_ptr<Desc> graph;
};

namespace {

// Adds tensors and operations to a GraphParts in the order cuDNN's pattern matcher expects (producers
// first). Tensors are named by their index in parts.tensors.
class GraphBuilder {
 public:
  explicit GraphBuilder(GraphParts* parts) : parts_(parts) { parts_->scalars.reserve(8); }

  int bound(Uid uid, const Dims& dims, cudnnDataType_t type) { return tensor(uid, dims, type, false, false); }
  int virt(const Dims& dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(next_uid_++, dims, type, true, false);
  }
  // A host scalar passed by value at execution (its value lives in the plan).
  int scalar(float value) {
    const int64_t uid = next_uid_++;
    parts_->scalars.emplace_back(uid, value);
    const Dims one{{1, 1, 1, 1}, {1, 1, 1, 1}};
    return tensor(uid, one, CUDNN_DATA_FLOAT, false, true);
  }

  void pointwise(cudnnPointwiseMode_t mode, int x, int y, int b = -1, int t = -1,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const float one = 1.0f;
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, at(x))
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, at(y))
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    if (b >= 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, at(b));
    if (t >= 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, at(t));
    add(std::move(pw), std::move(op));
  }

  void matmul(int a, int b, int c) {
    Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    mm.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, at(a))
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, at(b))
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, at(c))
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    add(std::move(mm), std::move(op));
  }

  void reduction(cudnnReduceTensorOp_t reduce, int x, int y) {
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    red.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, at(x))
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, at(y))
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    add(std::move(red), std::move(op));
  }

  // y views x's elements with other dims/strides (a transpose of the same memory).
  void reshape(int x, int y) {
    Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, at(x))
        .set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, at(y));
    add(std::nullopt, std::move(op));
  }

  // Top-left causal mask: scores whose key index exceeds the query index become -inf.
  int causal_mask(int scores, const Dims& dims) {
    const int row = virt(dims, CUDNN_DATA_INT32), col = virt(dims, CUDNN_DATA_INT32);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, row, -1, -1, CUDNN_DATA_FLOAT, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, col, -1, -1, CUDNN_DATA_FLOAT, 3);
    const int keep = virt(dims, CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, keep, col, -1, CUDNN_DATA_BOOLEAN);
    const int masked = virt(dims);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, masked, scalar(-std::numeric_limits<float>::infinity()),
              keep);
    return masked;
  }

  void finish(cudnnHandle_t handle) {
    auto graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph
        ->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(parts_->ops.size()), parts_->ops.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    graph->finalize();
    parts_->graph = std::move(graph);
  }

 private:
  int tensor(int64_t uid, const Dims& dims, cudnnDataType_t type, bool is_virtual, bool by_value) {
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.size.data())
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, dims.stride.data())
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    t.finalize();
    parts_->tensors.push_back(std::move(t));
    return static_cast<int>(parts_->tensors.size() - 1);
  }

  const Desc& at(int index) const { return parts_->tensors[static_cast<size_t>(index)]; }

  void add(std::optional<Desc> settings, Desc op) {
    op.finalize();
    if (settings) parts_->keep.push_back(std::move(*settings));
    parts_->ops.push_back(op.get());
    parts_->keep.push_back(std::move(op));
  }

  GraphParts* parts_;
  int64_t next_uid_ = kFirstInternalUid;
};

void build_forward(GraphBuilder& g, const Problem& p) {
  const cudnnDataType_t io = io_type(p.dtype);
  const Dims scores = dense(p.b, p.h, p.l, p.s), rows = dense(p.b, p.h, p.l, 1);
  const int q = g.bound(kQ, strided(p.b, p.h, p.l, p.d, p.q_strides), io);
  const int kt = g.bound(kK, transposed(strided(p.b, p.h, p.s, p.d, p.k_strides)), io);
  const int v = g.bound(kV, strided(p.b, p.h, p.s, p.d, p.v_strides), io);
  const int o = g.bound(kO, dense(p.b, p.h, p.l, p.d), io);
  const int stats = g.bound(kStats, rows, CUDNN_DATA_FLOAT);

  const int product = g.virt(scores);
  g.matmul(q, kt, product);
  int s = g.virt(scores);
  g.pointwise(CUDNN_POINTWISE_MUL, product, s, g.scalar(static_cast<float>(p.scale)));
  if (p.causal) s = g.causal_mask(s, scores);
  // Softmax with its logsumexp saved for the backward.
  const int max = g.virt(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, max);
  const int shifted = g.virt(scores), exp = g.virt(scores);
  g.pointwise(CUDNN_POINTWISE_SUB, s, shifted, max);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, exp);
  const int sum = g.virt(rows), log_sum = g.virt(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exp, sum);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, max, stats, log_sum);
  const int probs = g.virt(scores, io);  // the second matmul takes the weights in the io dtype
  g.pointwise(CUDNN_POINTWISE_DIV, exp, probs, sum);
  g.matmul(probs, v, o);
}

void build_backward(GraphBuilder& g, const Problem& p) {
  const cudnnDataType_t io = io_type(p.dtype);
  const Dims scores = dense(p.b, p.h, p.l, p.s), rows = dense(p.b, p.h, p.l, 1);
  const Dims k_dims = strided(p.b, p.h, p.s, p.d, p.k_strides);
  const int q = g.bound(kQ, strided(p.b, p.h, p.l, p.d, p.q_strides), io);
  const int kt = g.bound(kK, transposed(k_dims), io);
  const int vt = g.bound(kV, transposed(strided(p.b, p.h, p.s, p.d, p.v_strides)), io);
  const int o = g.bound(kO, dense(p.b, p.h, p.l, p.d), io);
  const int grad_o = g.bound(kGradO, dense(p.b, p.h, p.l, p.d), io);
  const int stats = g.bound(kStats, rows, CUDNN_DATA_FLOAT);
  const int grad_q = g.bound(kGradQ, dense(p.b, p.h, p.l, p.d), io);
  const int grad_k = g.bound(kGradK, dense(p.b, p.h, p.s, p.d), io);
  const int grad_v = g.bound(kGradV, dense(p.b, p.h, p.s, p.d), io);
  const int softmax_sum = g.bound(kSoftmaxSum, rows, CUDNN_DATA_FLOAT);
  const int grad_q_accum = g.bound(kGradQAccum, dense(p.b, p.h, p.l, p.d), CUDNN_DATA_FLOAT);
  const int scale = g.scalar(static_cast<float>(p.scale));

  // D = rowsum(dO * O), kept in the scratch tensor.
  const int grad_o_o = g.virt(dense(p.b, p.h, p.l, p.d)), row_sum = g.virt(rows);
  g.pointwise(CUDNN_POINTWISE_MUL, grad_o, grad_o_o, o);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, grad_o_o, row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, softmax_sum, g.scalar(1.0f));
  // P = exp(S * scale - stats), masked as in the forward; dV = P^T dO.
  const int product = g.virt(scores), scaled = g.virt(scores);
  g.matmul(q, kt, product);
  g.pointwise(CUDNN_POINTWISE_MUL, product, scaled, scale);
  int centred = g.virt(scores);
  g.pointwise(CUDNN_POINTWISE_SUB, scaled, centred, stats);
  if (p.causal) centred = g.causal_mask(centred, scores);
  const int probs = g.virt(scores), probs_t = g.virt(transposed(scores), io);
  g.pointwise(CUDNN_POINTWISE_EXP, centred, probs);
  g.reshape(probs, probs_t);
  g.matmul(probs_t, grad_o, grad_v);
  // dS = P * (dO V^T - D) * scale; dK = dS^T Q; dQ = dS K (f32, then cast).
  const int grad_p = g.virt(scores), centred_grad = g.virt(scores), grad_s = g.virt(scores);
  g.matmul(grad_o, vt, grad_p);
  g.pointwise(CUDNN_POINTWISE_SUB, grad_p, centred_grad, softmax_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, centred_grad, grad_s, probs);
  const int grad_s_scaled = g.virt(scores), grad_s_t = g.virt(transposed(scores), io);
  g.pointwise(CUDNN_POINTWISE_MUL, grad_s, grad_s_scaled, scale);
  g.reshape(grad_s_scaled, grad_s_t);
  g.matmul(grad_s_t, q, grad_k);
  const int k = g.virt(k_dims, io);
  g.reshape(kt, k);
  g.matmul(grad_s_scaled, k, grad_q_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, grad_q_accum, grad_q);
}

// cuDNN's message for the last failed call on this thread.
std::string last_cudnn_error() {
  char text[512] = {};
  cudnnGetLastErrorString(text, sizeof(text));
  return text[0] != '\0' ? std::string(text) : std::string("no message");
}

}  // namespace

class Plan {
 public:
  Plan(std::shared_ptr<GraphParts> parts, Desc config, Desc plan, size_t workspace, int64_t engine)
      : parts_(std::move(parts)),
        config_(std::move(config)),
        plan_(std::move(plan)),
        workspace_(workspace),
        engine_(engine) {}

  size_t workspace() const { return workspace_; }
  int64_t engine() const { return engine_; }
  const Desc& plan() const { return plan_; }
  const GraphParts& parts() const { return *parts_; }

 private:
  std::shared_ptr<GraphParts> parts_;
  Desc config_;
  Desc plan_;
  size_t workspace_;
  int64_t engine_;
};

const char* direction_name(Direction direction) {
  return direction == Direction::forward ? "forward" : "backward";
}

BuildResult build_plan(Direction direction, cudnnHandle_t handle, const Problem& problem) {
  BuildResult result;
  auto parts = std::make_shared<GraphParts>();
  try {
    GraphBuilder builder(parts.get());
    if (direction == Direction::forward) {
      build_forward(builder, problem);
    } else {
      build_backward(builder, problem);
    }
    builder.finish(handle);
  } catch (const Error& e) {
    result.error = str_cat("graph not accepted: ", e.what());
    return result;
  }
  std::string rejected;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<Desc> configs;
    try {
      configs = heuristic_engine_configs(*parts->graph, mode, 16);
    } catch (const Error& e) {
      rejected += str_cat(" heuristics (mode ", static_cast<int>(mode), "): ", e.what(), ";");
      continue;
    }
    for (Desc& config : configs) {
      try {
        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
            .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        const int64_t engine = engine_global_index(config);
        if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) {
          rejected += str_cat(" engine ", engine, ": ", last_cudnn_error(), ";");
          continue;
        }
        int64_t bytes = 0, count = 0;
        LIFTOFF_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                     CUDNN_TYPE_INT64, 1, &count, &bytes));
        result.plan = std::make_shared<Plan>(parts, std::move(config), std::move(plan),
                                             static_cast<size_t>(std::max<int64_t>(bytes, 0)), engine);
        return result;
      } catch (const Error& e) {
        rejected += str_cat(" ", e.what(), ";");
      }
    }
    if (configs.empty()) rejected += str_cat(" heuristics (mode ", static_cast<int>(mode), "): no engine;");
  }
  result.error = str_cat("no engine configuration finalized:", rejected);
  return result;
}

size_t workspace_bytes(const Plan& plan) {
  return plan.workspace();
}

std::string describe(const Plan& plan) {
  return str_cat("engine ", plan.engine(), ", workspace ", plan.workspace(), " B");
}

void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<Binding>& bindings, void* workspace) {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const Binding& b : bindings) {
    uids.push_back(b.uid);
    pointers.push_back(b.data);
  }
  for (const auto& [uid, value] : plan.parts().scalars) {
    uids.push_back(uid);
    pointers.push_back(const_cast<float*>(&value));  // read by the host when the plan is enqueued
  }
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  LIFTOFF_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan().get(), pack.get()));
}

}  // namespace liftoff::cuda::sdpa
