// The autograd graph as Graphviz DOT: a picture of what backward will walk.
//
//     Tensor loss = cross_entropy(model.forward(src, tgt_in).reshape({-1, V}), targets, pad, 0.1);
//     std::ofstream out("step.dot");
//     write_dot(loss, out, model.named_parameters());
//     // then: dot -Tsvg step.dot -o step.svg
//
// One DOT node per op (Node::name(), the shape and dtype of what it produced) and one per leaf
// that requires grad (a parameter: its dotted name and shape), with an edge from each input to
// the op that used it. Inputs that need no gradient (token ids, masks) are not part of the
// graph and do not appear. Call it after forward and before backward: backward frees what the
// ops saved, but the graph's links and shapes stay, so the dump also works afterwards.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace sf {

struct GraphDotCounts {
  std::size_t ops = 0;     // op nodes (MatMul, Softmax, ...)
  std::size_t leaves = 0;  // parameters and other leaves that require grad
  std::size_t edges = 0;   // input -> op arrows
};

// Writes the graph that ends in `root` as a DOT digraph. `names` labels leaves (usually
// model.named_parameters()); a leaf not in it shows its Tensor::name(), or "leaf".
// Node ids are stable: ops are numbered in the order forward created them.
GraphDotCounts write_dot(const Tensor& root, std::ostream& out,
                         const std::vector<std::pair<std::string, Tensor>>& names = {});

}  // namespace sf
