// Random ops inside captured CUDA graphs (graph-safe Philox state, runtime/random.h): each replay draws what
// the same eager call would draw at the generator's position then, fresh masks every replay, gradients
// regenerated from the same mask, set_state() between replays taking effect, and the generator's device
// state kept apart from the memory the captured kernels use.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "ops/attention/attention.h"
#include "ops/dropout/dropout.h"
#include "ops/scale/scale.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Captures `body` (which writes its results into tensors made before the capture) into a graph.
std::unique_ptr<CudaGraph> capture(const std::function<void()>& body) {
  auto graph = std::make_unique<CudaGraph>(Device::cuda(0));
  graph->begin_capture();
  try {
    body();
  } catch (...) {
    graph->abort_capture();
    throw;
  }
  graph->end_capture();
  return graph;
}

::testing::AssertionResult same(const Tensor& actual, const Tensor& expected) {
  return testing::all_close(actual.to(Device::cpu()), expected.to(Device::cpu()), 0.0, 0.0);
}

// y = dropout(x) twice per "step", with the gradient of sum(y1 + 2 y2) w.r.t. x.
struct DropoutStep {
  Tensor x =
      testing::random_tensor({3, 1001}, 5, 0.5, 1.5, DType::f32, Device::cuda(0)).set_requires_grad(true);
  Tensor y1 = Tensor::empty({3, 1001}, DType::f32, Device::cuda(0));
  Tensor y2 = Tensor::empty({3, 1001}, DType::f32, Device::cuda(0));
  Tensor gx = Tensor::empty({3, 1001}, DType::f32, Device::cuda(0));

  void run(Generator& gen) {
    x.set_grad(Tensor());
    const Tensor a = dropout(x, 0.4, true, gen);
    const Tensor b = dropout(x, 0.4, true, gen);
    a.backward(Tensor::ones(a.shape(), DType::f32, Device::cuda(0)));
    b.backward(Tensor::full(b.shape(), 2.0, DType::f32, Device::cuda(0)));
    y1.copy_(a);
    y2.copy_(b);
    gx.copy_(x.grad());
  }
};

TEST(RandomOpsInGraphs, DropoutReplaysDrawTheMasksOfEagerSteps) {
  LIFTOFF_REQUIRE_CUDA();
  DropoutStep eager, graphed;
  Generator eager_gen(77), graph_gen(77);
  const std::unique_ptr<CudaGraph> graph = capture([&] { graphed.run(graph_gen); });
  EXPECT_EQ(graph_gen.offset(), 0u);  // the capture reserves nothing: the replays do
  Tensor previous;
  for (int step = 0; step < 4; ++step) {
    eager.run(eager_gen);
    graph->replay();
    EXPECT_TRUE(same(graphed.y1, eager.y1)) << "step " << step;
    EXPECT_TRUE(same(graphed.y2, eager.y2)) << "step " << step;
    EXPECT_TRUE(same(graphed.gx, eager.gx)) << "step " << step;
    EXPECT_FALSE(same(graphed.y1, graphed.y2)) << "two draws of one replay share a mask";
    if (previous.defined()) {
      EXPECT_FALSE(same(graphed.y1, previous)) << "a replay repeated the last mask";
    }
    previous = graphed.y1.to(Device::cpu());
  }
  EXPECT_EQ(graph_gen.offset(), eager_gen.offset());
  EXPECT_EQ(graph_gen.offset(), 8u);
}

TEST(RandomOpsInGraphs, EagerDrawsAndSetStateBetweenReplaysAreFollowed) {
  LIFTOFF_REQUIRE_CUDA();
  DropoutStep eager, graphed;
  Generator eager_gen(3), graph_gen(3);
  const std::unique_ptr<CudaGraph> graph = capture([&] { graphed.run(graph_gen); });
  graph->replay();
  eager.run(eager_gen);
  // An eager step in between (an epoch's short last batch, say) moves both generators on.
  eager.run(eager_gen);
  graphed.run(graph_gen);
  eager.run(eager_gen);
  graph->replay();
  EXPECT_TRUE(same(graphed.y2, eager.y2));
  // A restored checkpoint: the next replay starts from the restored (seed, offset).
  graph_gen.set_state(1234, 40);
  eager_gen.set_state(1234, 40);
  eager.run(eager_gen);
  graph->replay();
  EXPECT_TRUE(same(graphed.y1, eager.y1));
  EXPECT_TRUE(same(graphed.gx, eager.gx));
  EXPECT_EQ(graph_gen.offset(), 42u);
}

TEST(RandomOpsInGraphs, CopiedGeneratorsDrawTheirOwnStreams) {
  LIFTOFF_REQUIRE_CUDA();
  DropoutStep graphed;
  Generator gen(9);
  Generator copy = gen;  // independent state: the graph reads gen's only
  const std::unique_ptr<CudaGraph> graph = capture([&] { graphed.run(gen); });
  graph->replay();
  EXPECT_EQ(gen.offset(), 2u);
  EXPECT_EQ(copy.offset(), 0u);
  DropoutStep eager;
  eager.run(copy);  // copy at offset 0 draws what the first replay drew
  EXPECT_TRUE(same(graphed.y1, eager.y1));
}

TEST(RandomOpsInGraphs, AttentionDropoutReplaysDrawTheMasksOfEagerCalls) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor q = testing::random_tensor({2, 2, 8, 16}, 41, -1, 1, DType::f32, cuda).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 2, 12, 16}, 42, -1, 1, DType::f32, cuda);
  const Tensor v = testing::random_tensor({2, 2, 12, 16}, 43, -1, 1, DType::f32, cuda);
  const Tensor out = Tensor::empty({2, 2, 8, 16}, DType::f32, cuda);
  const Tensor grad = Tensor::empty({2, 2, 8, 16}, DType::f32, cuda);
  const auto step = [&](Generator& gen) {
    q.set_grad(Tensor());
    const Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.3, false, std::nullopt, &gen);
    y.backward(Tensor::ones(y.shape(), DType::f32, cuda));
    out.copy_(y);
    grad.copy_(q.grad());
  };
  Generator eager_gen(21), graph_gen(21);
  const std::unique_ptr<CudaGraph> graph = capture([&] { step(graph_gen); });
  Tensor previous;
  for (int call = 0; call < 3; ++call) {
    graph->replay();
    const Tensor graphed_out = out.to(Device::cpu()), graphed_grad = grad.to(Device::cpu());
    step(eager_gen);
    EXPECT_TRUE(same(graphed_out, out)) << "call " << call;
    EXPECT_TRUE(same(graphed_grad, grad)) << "call " << call;
    if (previous.defined()) {
      EXPECT_FALSE(same(graphed_out, previous));
    }
    previous = graphed_out;
  }
  EXPECT_EQ(graph_gen.offset(), 3u);
}

// A generator's device state is written before each replay, outside the graph, and read inside it, so no
// captured kernel may write its memory. Here the capture frees a temporary of the state's size class (512
// bytes) right before the generator's first draw, as the half-precision training step did: were the state
// made from the graph's pool, it would take that block, and each replay's temporary would overwrite the
// (seed, offset) before dropout read it (every replayed mask wrong, in f32 as in halves).
TEST(RandomOpsInGraphs, StateIsNotABlockTheCapturedStepFreed) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor x = testing::random_tensor({4, 32}, 13, 0.5, 1.5, DType::f32, cuda).to(cuda, dtype);
    const Tensor y = Tensor::empty(x.shape(), dtype, cuda);
    const auto step = [&](Generator& gen) {
      { const Tensor scratch = scale(x, 3.0); }  // allocated and freed inside the capture
      y.copy_(dropout(x, 0.5, true, gen));
    };
    Generator eager_gen(11), graph_gen(11);
    const std::unique_ptr<CudaGraph> graph = capture([&] { step(graph_gen); });
    for (int replay = 0; replay < 3; ++replay) {
      graph->replay();
      const Tensor graphed = y.to(Device::cpu());
      step(eager_gen);
      EXPECT_TRUE(same(graphed, y)) << dtype_name(dtype) << ", replay " << replay;
    }
    EXPECT_EQ(graph_gen.offset(), eager_gen.offset());
  }
}

}  // namespace
}  // namespace liftoff
