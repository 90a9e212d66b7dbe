#include "autograd/graph_dot.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "autograd/node.h"

namespace sf {

namespace {

// A DOT string literal: quotes and backslashes escaped, a newline written as DOT's line break.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string shape_and_dtype(const Shape& shape, Dtype dtype) {
  return shape_str(shape) + " " + dtype_name(dtype);
}

}  // namespace

GraphDotCounts write_dot(const Tensor& root, std::ostream& out,
                         const std::vector<std::pair<std::string, Tensor>>& names) {
  std::unordered_map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, t] : names) name_of.emplace(t.impl(), name);
  auto leaf_label = [&](const TensorImpl* leaf) {
    if (auto it = name_of.find(leaf); it != name_of.end()) return it->second;
    return leaf->name.empty() ? std::string("leaf") : leaf->name;
  };

  // 1. Every node reachable from the root (explicit stack, as in engine.cpp: deep graphs must
  //    not overflow the call stack).
  std::vector<Node*> ops;                                  // op nodes
  std::vector<const TensorImpl*> leaves;                   // one per leaf tensor
  std::unordered_map<const Node*, bool> seen;
  std::vector<Node*> stack;
  if (root.grad_fn()) stack.push_back(root.grad_fn().get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (seen[n]) continue;
    seen[n] = true;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      // A parameter used by several ops has one AccumulateGrad per use; draw the leaf once.
      if (std::find(leaves.begin(), leaves.end(), acc->leaf.get()) == leaves.end()) leaves.push_back(acc->leaf.get());
      continue;
    }
    ops.push_back(n);
    for (const auto& next : n->inputs)
      if (next) stack.push_back(next.get());
  }
  if (!root.grad_fn() && root.defined() && root.requires_grad()) leaves.push_back(root.impl());

  // 2. Stable ids: ops in creation order (n0 is the first op forward ran), leaves by name.
  std::sort(ops.begin(), ops.end(), [](const Node* a, const Node* b) { return a->sequence_nr < b->sequence_nr; });
  std::stable_sort(leaves.begin(), leaves.end(),
                   [&](const TensorImpl* a, const TensorImpl* b) { return leaf_label(a) < leaf_label(b); });
  std::unordered_map<const Node*, std::string> op_id;
  std::unordered_map<const TensorImpl*, std::string> leaf_id;
  for (std::size_t i = 0; i < ops.size(); ++i) op_id[ops[i]] = "n" + std::to_string(i);
  for (std::size_t i = 0; i < leaves.size(); ++i) leaf_id[leaves[i]] = "p" + std::to_string(i);
  auto id_of_input = [&](const Node* input) {
    if (const auto* acc = dynamic_cast<const AccumulateGrad*>(input)) return leaf_id.at(acc->leaf.get());
    return op_id.at(input);
  };

  // 3. The DOT text.
  GraphDotCounts counts;
  counts.ops = ops.size();
  counts.leaves = leaves.size();
  out << "// The autograd graph: ops (ellipses) and parameters (boxes), arrows from inputs to the op using them.\n"
      << "// Render with: dot -Tsvg FILE.dot -o FILE.svg\n"
      << "digraph autograd {\n"
      << "  node [fontname=\"monospace\", fontsize=10];\n";
  for (const TensorImpl* leaf : leaves)
    out << "  " << leaf_id[leaf] << " [shape=box, style=filled, fillcolor=lightblue, label="
        << quoted(leaf_label(leaf) + "\n" + shape_and_dtype(leaf->shape, leaf->dtype)) << "];\n";
  const Node* root_node = root.grad_fn().get();
  for (const Node* n : ops)
    out << "  " << op_id[n] << " [shape=ellipse, label=" << quoted(std::string(n->name()) + "\n" +
                                                                  shape_and_dtype(n->output_shape, n->output_dtype))
        << (n == root_node ? ", style=filled, fillcolor=gold, peripheries=2" : "") << "];\n";
  for (const Node* n : ops)
    for (const auto& input : n->inputs) {
      if (!input) continue;
      out << "  " << id_of_input(input.get()) << " -> " << op_id[n] << ";\n";
      ++counts.edges;
    }
  out << "}\n";
  return counts;
}

}  // namespace sf
