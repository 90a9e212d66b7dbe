// The autograd graph.
//
// Every differentiable op is a struct derived from Node, with its forward and backward written
// side by side in one file (see ops_*.cpp). When an op runs on inputs that require grad, its
// forward creates a node, stores in it what backward needs ("saved for backward"), and links it:
//
//     output.grad_fn  --->  Node "MatMul"  --inputs[0]-->  Node of a (or AccumulateGrad for a leaf)
//                                          --inputs[1]-->  Node of b (or null: b needs no grad)
//
// Tensor::backward() walks these links in topological order (iteratively, see engine.cpp),
// calls each node's backward with the gradient of its output, and accumulates the gradients
// it returns into the nodes of its inputs. AccumulateGrad nodes add into a leaf's .grad.
//
// One naming rule in every backward: the incoming gradient is always `grad_output` (dL/d output);
// gradients accumulate, never overwrite.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf {

struct Node {
  virtual ~Node() = default;

  // The op's name as a debugger or a graph dump shows it ("MatMul", "Softmax").
  virtual const char* name() const = 0;

  // Given dL/d(output), return dL/d(input i) for every input, in the order of `inputs`.
  // An entry may be left undefined where needs_input_grad(i) is false.
  // Gradients must have exactly the shape of their input (the engine checks).
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;

  // Drop the tensors saved for backward (called after backward unless retain_graph).
  virtual void release_saved() {}

  // Where each input's gradient goes: the input's own grad_fn, an AccumulateGrad node for a
  // leaf that requires grad, or null for an input that needs no gradient.
  std::vector<std::shared_ptr<Node>> inputs;
  std::vector<Shape> input_shapes;  // to check gradient shapes

  // What the op produced, for graph dumps, printing and retain_grad.
  Shape output_shape;
  Dtype output_dtype = Dtype::Float32;
  std::weak_ptr<TensorImpl> output;

  bool released = false;  // saved tensors were freed by an earlier backward
  std::uint64_t sequence_nr = 0;  // creation order, for a stable graph dump

  bool needs_input_grad(std::size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
};

// The node at the end of every path: adds the incoming gradient into a leaf's .grad.
struct AccumulateGrad final : Node {
  std::shared_ptr<TensorImpl> leaf;
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf_impl) : leaf(std::move(leaf_impl)) {}
  const char* name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> backward(const Tensor& grad_output) override;
};

// ---- grad mode ----
bool grad_enabled();
void set_grad_enabled(bool on);

// While alive, ops record no graph (used by backward itself, optimizers, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};

// True when an op on these inputs must record a node: grad mode is on and some input
// requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Links `node` between `inputs` and `output`: fills node->inputs, shapes, output metadata, and
// sets output's grad_fn and requires_grad. Call only when any_requires_grad(inputs).
void connect(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
             Tensor& output);
// The same for a list of tensors (cat, stack).
void connect_all(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                 Tensor& output);

// Runs backward from `root` (engine.cpp). Used by Tensor::backward.
// root_grad: dL/d(root), root's shape; undefined for a one-element root (then 1).
void run_backward(const Tensor& root, const Tensor& root_grad, bool retain_graph);

// Adds `grad` into `slot` (out of place): slot = slot ? slot + grad : grad.
void accumulate_into(Tensor& slot, const Tensor& grad);

}  // namespace sf
