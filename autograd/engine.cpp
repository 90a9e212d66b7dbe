// The backward engine: walks the graph from a root tensor in topological order.
//
// 1. Collect every node reachable from the root's grad_fn (iterative depth-first search with an
//    explicit stack: a 10,000-op chain must not overflow the call stack) and count, for each
//    node, how many edges from reachable nodes point at it.
// 2. Kahn's algorithm: a node runs once all the nodes that feed it a gradient have run. Its
//    incoming gradients have been summed by then, so it is called exactly once.
// 3. After a node runs, its saved tensors are released unless retain_graph.
#include <atomic>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "autograd/check.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {
thread_local bool g_grad_enabled = true;
std::atomic<std::uint64_t> g_sequence{0};
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void connect(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
             Tensor& output) {
  node->inputs.clear();
  node->input_shapes.clear();
  for (const Tensor* t : inputs) {
    std::shared_ptr<Node> edge;
    if (t && t->defined() && t->requires_grad())  // an op's output, or a leaf (a parameter)
      edge = t->grad_fn() ? t->grad_fn() : std::make_shared<AccumulateGrad>(t->impl_ptr());
    node->inputs.push_back(std::move(edge));
    node->input_shapes.push_back(t && t->defined() ? t->shape() : Shape{});
  }
  node->output_shape = output.shape();
  node->output_dtype = output.dtype();
  node->output = output.impl_ptr();
  node->sequence_nr = g_sequence++;
  output.impl()->grad_fn = node;
  output.impl()->requires_grad = true;
}

void connect_all(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs, Tensor& output) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  connect(node, ptrs, output);
}

void accumulate_into(Tensor& slot, const Tensor& grad) {
  if (!slot.defined())
    slot = grad;
  else
    slot = add(slot, grad);
}

namespace {
// Adds `grad` into a tensor's .grad (`slot`). The first gradient is cloned: `grad` may alias
// another tensor (Add's backward hands the same tensor to both inputs), and .grad must own its
// memory.
void accumulate_owned(std::shared_ptr<TensorImpl>& slot, const Tensor& grad) {
  Tensor current(slot);
  slot = (current.defined() ? add(current, grad) : clone(grad)).impl_ptr();
}
// dL/d(root) to start from: the given gradient (root's shape), or 1 for a one-element root.
Tensor seed_gradient(const Tensor& root, const Tensor& root_grad) {
  SF_EXPECT(root.requires_grad(), "backward: the tensor does not require grad (no input of the ops that made it has "
            "requires_grad set)");
  if (!root_grad.defined()) {
    SF_EXPECT(root.numel() == 1, "backward: called without a gradient on a tensor of shape ", root.shape(),
              "; only a one-element tensor gets the implicit gradient 1");
    return ones(root.shape(), root.dtype());
  }
  SF_EXPECT(root_grad.shape() == root.shape(), "backward: gradient shape ", root_grad.shape(),
            " does not match the tensor's shape ", root.shape());
  return root_grad;
}

// Every node reachable from `start`, with the number of edges into it (how many gradients it
// waits for before its own backward can run). Iterative: deep graphs cannot overflow the stack.
std::unordered_map<Node*, int> count_dependencies(Node* start) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{start};
  deps[start] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& next : n->inputs) {
      if (!next) continue;
      auto [it, inserted] = deps.try_emplace(next.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(next.get());
    }
  }
  return deps;
}

}  // namespace

std::vector<Tensor> AccumulateGrad::backward(const Tensor& grad_output) {
  accumulate_owned(leaf->grad, grad_output);
  return {};
}

void run_backward(const Tensor& root, const Tensor& root_grad, bool retain_graph) {
  const Tensor seed = seed_gradient(root, root_grad);  // dL/d(root)

  NoGradGuard no_grad;  // backward computations record no graph

  std::shared_ptr<Node> start = root.grad_fn();
  if (!start) start = std::make_shared<AccumulateGrad>(root.impl_ptr());  // backward on a leaf

  // 1. reachable nodes and their dependency counts
  std::unordered_map<Node*, int> deps = count_dependencies(start.get());

  // 2. Kahn's algorithm
  std::unordered_map<Node*, Tensor> grads;
  grads[start.get()] = seed;
  std::deque<Node*> ready{start.get()};
  while (!ready.empty()) {
    Node* n = ready.front();
    ready.pop_front();
    Tensor grad_output = std::move(grads[n]);  // dL/d(n's output), summed over every path into it
    grads.erase(n);
    if (!grad_output.defined()) {  // no path delivered a gradient here: pass the "nothing" on
      for (const auto& next : n->inputs)
        if (next && --deps[next.get()] == 0) {
          grads.try_emplace(next.get());
          ready.push_back(next.get());
        }
      continue;
    }
    SF_EXPECT(!n->released, "backward: trying to backward through the graph a second time: ", n->name(),
              "'s saved tensors were freed by the first backward; pass retain_graph = true to the first backward "
              "if you need a second one");
    if (auto out = n->output.lock(); out && out->retains_grad) accumulate_owned(out->grad, grad_output);
    std::vector<Tensor> input_grads = n->backward(grad_output);
    grad_output = Tensor();
    if (!retain_graph && dynamic_cast<AccumulateGrad*>(n) == nullptr) {
      n->release_saved();
      n->released = true;
    }
    for (std::size_t i = 0; i < n->inputs.size(); ++i) {
      Node* next = n->inputs[i].get();
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        const Tensor& gi = input_grads[i];
        SF_CHECK(gi.shape() == n->input_shapes[i], "backward: ", n->name(), " returned a gradient of shape ",
                 gi.shape(), " for input ", i, " of shape ", n->input_shapes[i]);
        accumulate_into(grads[next], gi);
      }
      if (--deps[next] == 0) {
        grads.try_emplace(next);  // undefined if every path into it gave no gradient
        ready.push_back(next);
      }
    }
  }
}

}  // namespace sf
