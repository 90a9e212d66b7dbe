// Trace mode: what every module produced, and the gradient that came back to it.
//
//   scratchformer train --config FILE --trace [--trace-steps N] [--trace-file FILE]
//   scratchformer translate --checkpoint FILE --trace [--trace-steps N] [--trace-file FILE]
//
// A ModuleTrace puts a forward hook on every module of a model (nn/module.h). Each hook call
// becomes one row: the module's dotted path, its type, its output's shape, and the output's
// statistics (mean, std, min, max over the finite elements; how many are NaN and Inf). In
// training it also calls retain_grad() on each output, so after backward the same rows can be
// printed for dL/d(output), in the order backward reached them, plus one row per parameter
// gradient. A module called twice in one forward (a shared dropout) gives two rows.
//
//   ModuleTrace trace(model, /*gradients=*/true);
//   Tensor loss = ...model.forward(src, tgt_in)...;
//   loss.backward();
//   trace.stop();
//   std::cerr << format_trace_table("forward", trace.forward_rows());
//   std::cerr << format_trace_table("backward", trace.gradient_rows());
#pragma once

#include <cstdint>
#include <ostream>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/model.h"
#include "nn/module.h"
#include "train/trainer.h"

namespace sf::train {

// Statistics of a tensor's values (any dtype, read as double). mean, std (population: divided
// by the count), min and max are over the finite elements only; all four are NaN when there is
// none. nan and inf count the others.
struct TensorStats {
  std::int64_t count = 0;  // numel
  std::int64_t nan = 0, inf = 0;
  double mean = 0, std = 0, min = 0, max = 0;
};
TensorStats tensor_stats(const Tensor& t);

struct TraceRow {
  std::string path;  // dotted module path ("encoder.layers.0.self_attn"); "(model)" for the root
  std::string type;  // module type ("MultiHeadAttention")
  Shape shape;
  TensorStats stats;
};

class ModuleTrace {
 public:
  // Hooks every module of `model` (the root as "(model)"). With `gradients`, outputs that
  // require grad keep their .grad through backward, for gradient_rows().
  ModuleTrace(nn::Module& model, bool gradients);
  ~ModuleTrace() { stop(); }
  ModuleTrace(const ModuleTrace&) = delete;
  ModuleTrace& operator=(const ModuleTrace&) = delete;

  void stop();  // removes the hooks; the rows stay

  // One row per module call, in the order the calls finished (children before parents).
  const std::vector<TraceRow>& forward_rows() const { return rows_; }
  // After backward: dL/d(output) of each recorded call, in reverse forward order (the order
  // backward reaches them). Calls whose output needed no gradient, or got none, are skipped.
  std::vector<TraceRow> gradient_rows() const;
  // After backward: one row per parameter of the model with a gradient, path = parameter name.
  std::vector<TraceRow> parameter_gradient_rows() const;

 private:
  nn::Module& model_;
  bool gradients_;
  nn::HookHandle handle_;
  std::vector<TraceRow> rows_;
  std::vector<Tensor> outputs_;  // rows_[i]'s output, kept to read its .grad after backward
};

// An aligned table: a title line, a header (first column named `first_column`), one line per row.
std::string format_trace_table(const std::string& title, const std::vector<TraceRow>& rows,
                               const std::string& first_column = "module");

// The training loop's trace of one optimizer step (its first micro-batch): forward rows,
// output-gradient rows and parameter-gradient rows, each as a table.
void write_step_trace(std::ostream& out, std::int64_t step, const ModuleTrace& trace);

// translate --trace: encodes `src_ids` (one sentence) and runs `steps` greedy decoding steps
// with the KV cache, under a trace, then writes the forward table. No gradients.
void trace_translation(nn::Model& model, const std::vector<std::int64_t>& src_ids, std::int64_t steps, std::ostream& out);

// --dump-graph: writes the autograd graph ending in `loss` as DOT to `path`, with the model's
// parameter names; if Graphviz's `dot` is installed, renders path with .svg as well. Reports
// what it wrote (or how to render it) on `log`.
void dump_graph(const Tensor& loss, const nn::Module& model, const std::string& path, std::ostream& log);

// `train --trace [--trace-steps N] [--trace-file F] [--dump-graph F]` as hooks on the training
// loop (train/trainer.h): a ModuleTrace on the first micro-batch of the session's first
// trace_steps steps, written after its backward; the first step's graph before its backward.
struct TraceOptions {
  std::int64_t trace_steps = 0;  // 0 = no trace
  std::string trace_file{};      // "" = stderr
  std::string dump_graph{};      // "" = no graph
};

class TraceHooks : public StepHooks {
 public:
  explicit TraceHooks(TraceOptions options);
  void begin() override;  // opens trace_file
  void before_forward(nn::Model& model, std::int64_t session_step, std::int64_t step) override;
  void before_backward(const Tensor& loss, nn::Model& model, std::int64_t session_step, std::int64_t step) override;
  void after_backward(std::int64_t session_step, std::int64_t step) override;

 private:
  TraceOptions options_;
  std::ofstream file_;
  std::unique_ptr<ModuleTrace> trace_;
};

}  // namespace sf::train
