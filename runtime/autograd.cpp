#include "runtime/autograd.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "runtime/branches.h"
#include "runtime/deferred.h"
#include "runtime/error.h"
#include "runtime/leaf_grad_batch.h"

namespace liftoff {

namespace {
thread_local bool grad_mode_enabled = true;

// A fresh copy of g in `format`.
Tensor copy_in(const Tensor& g, MemoryFormat format) {
  Tensor out = Tensor::empty(g.shape(), g.dtype(), g.device(), format);
  out.copy_(g);
  return out;
}

bool is_half(DType d) {
  return d == DType::f16 || d == DType::bf16;
}

// The dtype in which two gradients a and b for `node` are summed. A leaf's gradients may arrive in half
// (autocast hands each master weight its copy's gradient as it is): for a wider leaf (f32, f64) they are
// summed in the leaf's dtype, as they were when each arrived converted (bf16 additions would drop terms,
// f16 ones overflow where f32 does not). Everything else sums in its own dtype (a mismatch fails there).
DType leaf_sum_dtype(const Node& node, DType a, DType b) {
  const std::optional<DType> leaf = node.leaf_dtype();
  if (!leaf || is_half(*leaf) || !is_floating(*leaf)) return a;
  if (!is_half(a) && !is_half(b)) return a;
  return *leaf;
}

// A gradient tensor we may add into without disturbing anybody else who holds it.
// Only the engine's handle may point at the memory (no other tensor, no view of it). A dense gradient keeps
// its layout (contiguous or channels-last), so sums of channels-last gradients stay channels-last.
bool exclusively_owned(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous(g.memory_format());
}
Tensor owned_copy(const Tensor& g) {
  return exclusively_owned(g) ? g : copy_in(g, g.memory_format());
}

// The gradients offered to the running node's backward (waiting_gradient), one per input edge.
thread_local const std::vector<Tensor>* offered_gradients = nullptr;
class OfferScope {
 public:
  explicit OfferScope(const std::vector<Tensor>* offers) : previous_(offered_gradients) {
    offered_gradients = offers;
  }
  ~OfferScope() { offered_gradients = previous_; }
  OfferScope(const OfferScope&) = delete;
  OfferScope& operator=(const OfferScope&) = delete;

 private:
  const std::vector<Tensor>* previous_;
};

// A leaf's first gradient, in the leaf's own layout where the leaf is dense (a contiguous parameter gets a
// contiguous .grad even when its gradient arrives channels-last), else contiguous.
Tensor leaf_grad(const Tensor& g, const Tensor& leaf) {
  const MemoryFormat format = leaf.memory_format();
  if (g.dtype() == leaf.dtype() && g.is_contiguous(format)) return owned_copy(g);
  Tensor out = Tensor::empty(g.shape(), leaf.dtype(), g.device(), format);
  out.copy_(g);
  return out;
}
}  // namespace

std::optional<DType> AccumulateGrad::leaf_dtype() const {
  const std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return std::nullopt;
  return leaf->dtype;
}

bool AccumulateGrad::has_grad_hooks() const {
  const std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  return leaf && !leaf->grad_ready_hooks.empty();
}

bool GradMode::is_enabled() {
  return grad_mode_enabled;
}
void GradMode::set_enabled(bool enabled) {
  grad_mode_enabled = enabled;
}

namespace {
// A recorded closure's run: it must still be there (release() frees it after one backward) and return one
// gradient per input.
template <class Closure>
std::vector<Tensor> run_closure(const std::string& name, bool released, size_t inputs, Closure run) {
  LIFTOFF_CHECK(!released, ValueError, "backward through ", name,
                " a second time: its saved tensors were freed; call backward once per forward");
  std::vector<Tensor> grads = run();
  LIFTOFF_CHECK(grads.size() == inputs, ValueError, "internal: backward of ", name, " returned ",
                grads.size(), " gradients for ", inputs, " inputs");
  return grads;
}
}  // namespace

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  return run_closure(name_, fn_ == nullptr, next.size(), [&] { return fn_(grad_output, needs_); });
}

std::vector<Tensor> MultiFunctionNode::apply_outputs(const std::vector<Tensor>& grad_outputs) {
  return run_closure(name_, fn_ == nullptr, next.size(), [&] { return fn_(grad_outputs, needs_); });
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf || !grad_output.defined()) return {};
  Tensor leaf_tensor(leaf);
  LIFTOFF_CHECK(grad_output.shape() == leaf->shape, ShapeError, "gradient of shape ",
                shape_str(grad_output.shape()), " for a leaf of shape ", shape_str(leaf->shape));
  // A half gradient of an f32 CUDA leaf (autocast's master weights) is converted with the others at the end
  // of the backward; a hook reads .grad at once, so a leaf with hooks is converted here.
  if (leaf->grad_ready_hooks.empty() && detail::LeafGradBatch::defer(leaf_tensor, grad_output)) return {};
  if (!leaf->grad) {
    leaf->grad = leaf_grad(grad_output, leaf_tensor).impl_ptr();
  } else {
    Tensor existing(leaf->grad);
    accumulate_into(existing, grad_output.to(existing.dtype()));
  }
  for (const auto& hook : leaf->grad_ready_hooks) hook(leaf_tensor);
  return {};
}

Tensor waiting_gradient(size_t input) {
  if (offered_gradients == nullptr || input >= offered_gradients->size()) return Tensor();
  return (*offered_gradients)[input];
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  TensorImpl& impl = t.impl();
  if (!impl.grad_accumulator) impl.grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return impl.grad_accumulator;
}

namespace {
// Where the inputs' gradients go: the node receiving each (null where none is needed) and which of that
// node's outputs the input was.
struct Edges {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<int> outputs;
  NeedsGrad needs;
};
Edges edges_of(const std::vector<Tensor>& inputs) {
  Edges e;
  e.nodes.resize(inputs.size());
  e.outputs.assign(inputs.size(), 0);
  e.needs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    e.nodes[i] = gradient_edge(inputs[i]);
    e.needs[i] = e.nodes[i] != nullptr;
    if (e.needs[i] && inputs[i].grad_fn()) e.outputs[i] = inputs[i].impl().grad_fn_output;
  }
  return e;
}
}  // namespace

void record(const Tensor& output, const std::string& name, const std::vector<Tensor>& inputs,
            BackwardFn backward) {
  Edges e = edges_of(inputs);
  auto node = std::make_shared<FunctionNode>(name, std::move(backward), std::move(e.needs));
  node->next = std::move(e.nodes);
  node->next_output = std::move(e.outputs);
  output.set_grad_fn(std::move(node));
}

void record(const std::vector<Tensor>& outputs, const std::string& name, const std::vector<Tensor>& inputs,
            MultiBackwardFn backward) {
  Edges e = edges_of(inputs);
  auto node = std::make_shared<MultiFunctionNode>(name, std::move(backward), std::move(e.needs),
                                                  static_cast<int>(outputs.size()));
  node->next = std::move(e.nodes);
  node->next_output = std::move(e.outputs);
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].set_grad_fn(node, static_cast<int>(i));
}

void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  LIFTOFF_CHECK(
      root.requires_grad(), ValueError,
      "backward: the tensor does not require grad (no input of the computation requires grad, or it "
      "ran under NoGradGuard)");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    LIFTOFF_CHECK(root.numel() == 1, ShapeError,
                  "backward: without an explicit gradient the tensor must hold one ", "element, got shape ",
                  shape_str(root.shape()));
    seed = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  LIFTOFF_CHECK(seed.shape() == root.shape(), ShapeError, "backward: gradient of shape ",
                shape_str(seed.shape()), " for a tensor of shape ", shape_str(root.shape()));
  std::shared_ptr<Node> root_node = gradient_edge(root);
  // Deferred kernels of the forward read parameters; issue them while those still hold the forward's values.
  flush_deferred_writes();

  // Count, for every reachable node, how many edges point at it.
  std::unordered_map<Node*, int> pending_inputs;
  std::vector<Node*> stack{root_node.get()};
  pending_inputs[root_node.get()] = 0;
  bool hooks = false;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    hooks = hooks || node->has_grad_hooks();
    for (const auto& next : node->next) {
      if (!next) continue;
      if (pending_inputs.emplace(next.get(), 0).second) stack.push_back(next.get());
      ++pending_inputs[next.get()];
    }
  }

  // Kahn's order: a node runs once every gradient flowing into it has arrived.
  detail::LeafGradBatch leaf_grads;  // the half gradients of f32 leaves, converted together at the end
  // The gradients arrived so far, one per output of each waiting node.
  std::unordered_map<Node*, std::vector<Tensor>> grads;
  const auto slots_of = [&grads](Node* node) -> std::vector<Tensor>& {
    std::vector<Tensor>& slots = grads[node];
    if (slots.empty()) slots.resize(static_cast<size_t>(std::max(node->outputs(), 1)));
    return slots;
  };
  slots_of(root_node.get())[static_cast<size_t>(root.grad_fn() ? root.impl().grad_fn_output : 0)] = seed;
  std::vector<std::shared_ptr<Node>> ready{root_node};
  // Weight gradients may run on a side stream (runtime/branches.h); a node fed one waits in `after_join`.
  detail::BackwardSideLane side(root.device(), /*allowed=*/!hooks);
  std::unordered_set<Node*> fed_from_side;
  std::vector<std::shared_ptr<Node>> after_join;
  const auto join_side = [&] {
    side.join();
    for (auto& n : after_join) ready.push_back(std::move(n));
    after_join.clear();
    fed_from_side.clear();
  };
  // The gradients already waiting for `node`'s inputs that its backward may add into (waiting_gradient).
  // An offer holds a second handle, so a slot that two of the node's inputs lead to is offered to the
  // first only (the second sees it shared).
  const auto offers_for = [&](const Node& node) {
    std::vector<Tensor> offers(node.next.size());
    for (size_t i = 0; i < node.next.size(); ++i) {
      Node* next = node.next[i].get();
      if (next == nullptr || next->leaf_dtype()) continue;
      const auto waiting = grads.find(next);
      if (waiting == grads.end()) continue;
      const size_t output = i < node.next_output.size() ? static_cast<size_t>(node.next_output[i]) : 0;
      const Tensor& slot = waiting->second[output];
      if (slot.defined() && !side.pending(slot) && exclusively_owned(slot)) offers[i] = slot;
    }
    return offers;
  };
  while (!ready.empty() || !after_join.empty()) {
    if (ready.empty()) join_side();
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    std::vector<Tensor> output_grads = std::move(slots_of(node.get()));
    grads.erase(node.get());
    std::vector<Tensor> input_grads;
    bool any = false;
    for (const Tensor& g : output_grads) any = any || g.defined();
    std::vector<Tensor> offers;
    if (any) {
      offers = offers_for(*node);
      const OfferScope scope(&offers);
      input_grads =
          output_grads.size() == 1 ? node->apply(output_grads[0]) : node->apply_outputs(output_grads);
    }
    output_grads.clear();
    // Which inputs' gradients the op added into their waiting slot; the offers' handles go (a slot must be
    // the engine's own again for the sums below).
    std::vector<bool> summed_in_place(node->next.size(), false);
    for (size_t i = 0; i < offers.size() && i < input_grads.size(); ++i) {
      summed_in_place[i] = offers[i].defined() && input_grads[i].defined() &&
                           input_grads[i].impl_ptr() == offers[i].impl_ptr();
    }
    offers.clear();
    if (!retain_graph) node->release();
    if (side.wants_join()) join_side();
    for (size_t i = 0; i < node->next.size(); ++i) {
      const auto& next = node->next[i];
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        const size_t output = i < node->next_output.size() ? static_cast<size_t>(node->next_output[i]) : 0;
        Tensor& slot = slots_of(next.get())[output];
        if (summed_in_place[i]) {
          input_grads[i] = Tensor();  // the slot holds the sum already
        } else if (!slot.defined()) {
          slot = std::move(input_grads[i]);
        } else {
          // A sum reads both gradients on the compute stream.
          if (side.pending(slot) || side.pending(input_grads[i])) join_side();
          if (const DType wide = leaf_sum_dtype(*next, slot.dtype(), input_grads[i].dtype());
              wide != slot.dtype() || wide != input_grads[i].dtype()) {
            Tensor sum = owned_copy(slot.to(wide));
            accumulate_into(sum, input_grads[i].to(wide));
            slot = std::move(sum);
          } else {
            slot = owned_copy(slot);
            accumulate_into(slot, input_grads[i]);
          }
        }
        if (side.pending(slot)) fed_from_side.insert(next.get());
      }
      if (--pending_inputs[next.get()] == 0) {
        if (fed_from_side.count(next.get()) != 0) {
          after_join.push_back(next);
        } else {
          ready.push_back(next);
        }
      }
    }
  }
  side.join(/*last=*/true);
  leaf_grads.flush();
}

}  // namespace liftoff
