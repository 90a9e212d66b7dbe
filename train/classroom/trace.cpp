#include "train/classroom/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "autograd/graph_dot.h"
#include "autograd/node.h"
#include "data/tokenizer.h"
#include "train/classroom/shell.h"

namespace sf::train {

namespace fs = std::filesystem;

// ---- statistics ------------------------------------------------------------------------------

TensorStats tensor_stats(const Tensor& t) {
  TensorStats s;
  const std::vector<double> v = t.detach().to_vector<double>();  // detach: record no graph
  s.count = static_cast<std::int64_t>(v.size());
  double sum = 0;
  std::int64_t finite = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  for (double x : v) {
    if (std::isnan(x)) ++s.nan;
    else if (std::isinf(x)) ++s.inf;
    else {
      sum += x;
      ++finite;
      s.min = std::min(s.min, x);
      s.max = std::max(s.max, x);
    }
  }
  if (finite == 0) {
    s.mean = s.std = s.min = s.max = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  s.mean = sum / static_cast<double>(finite);
  double squares = 0;  // second pass: sum of squared deviations (no cancellation as in E[x²] - E[x]²)
  for (double x : v)
    if (std::isfinite(x)) squares += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(squares / static_cast<double>(finite));
  return s;
}

// ---- ModuleTrace -----------------------------------------------------------------------------

namespace {
TraceRow make_row(std::string path, std::string type, const Tensor& t) {
  return {std::move(path), std::move(type), t.shape(), tensor_stats(t)};
}
}  // namespace

ModuleTrace::ModuleTrace(nn::Module& model, bool gradients) : model_(model), gradients_(gradients) {
  handle_ = model.register_forward_hook_recursive(
      [this](const nn::Module& module, const std::string& path, const Tensor& out) {
        rows_.push_back(make_row(path.empty() ? "(model)" : path, module.type_name(), out));
        if (gradients_ && out.requires_grad()) Tensor(out).retain_grad();  // keep dL/d(out) through backward
        outputs_.push_back(gradients_ ? out : Tensor());  // kept only to read its gradient
      });
}

void ModuleTrace::stop() { handle_.remove(); }

std::vector<TraceRow> ModuleTrace::gradient_rows() const {
  std::vector<TraceRow> rows;
  for (std::size_t i = outputs_.size(); i-- > 0;) {
    const Tensor g = outputs_[i].defined() && outputs_[i].requires_grad() ? outputs_[i].grad() : Tensor();
    if (g.defined()) rows.push_back(make_row(rows_[i].path, rows_[i].type, g));
  }
  return rows;
}

std::vector<TraceRow> ModuleTrace::parameter_gradient_rows() const {
  std::vector<TraceRow> rows;
  for (const auto& [name, p] : model_.named_parameters())
    if (p.grad().defined()) rows.push_back(make_row(name, "parameter", p.grad()));
  return rows;
}

// ---- the table ---------------------------------------------------------------------------------

namespace {
std::string number(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
}  // namespace

std::string format_trace_table(const std::string& title, const std::vector<TraceRow>& rows,
                               const std::string& first_column) {
  // Columns: text ones left-aligned, numbers right-aligned, two spaces apart.
  const std::vector<std::string> header = {first_column, "type", "shape", "mean", "std", "min", "max", "nan", "inf"};
  std::vector<std::vector<std::string>> cells = {header};
  for (const TraceRow& r : rows)
    cells.push_back({r.path, r.type, shape_str(r.shape), number(r.stats.mean), number(r.stats.std), number(r.stats.min),
                     number(r.stats.max), std::to_string(r.stats.nan), std::to_string(r.stats.inf)});
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& row : cells)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out = title + "\n";
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c < 3 ? row[c] + pad : pad + row[c];
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (rows.empty()) out += "(no rows)\n";
  return out + "\n";
}

void write_step_trace(std::ostream& out, std::int64_t step, const ModuleTrace& trace) {
  const std::string s = "step " + std::to_string(step);
  out << "trace: mean, std, min and max are over the finite elements; nan and inf count the others\n\n"
      << format_trace_table("trace " + s + " forward: module outputs, in the order they were computed",
                            trace.forward_rows())
      << format_trace_table("trace " + s + " backward: dL/d(module output), in the order backward reached them",
                            trace.gradient_rows())
      << format_trace_table("trace " + s + " backward: dL/d(parameter)", trace.parameter_gradient_rows(), "parameter");
  out.flush();
}

// ---- translate --trace -------------------------------------------------------------------------

void trace_translation(nn::Model& model, const std::vector<std::int64_t>& src_ids, std::int64_t steps, std::ostream& out) {
  if (src_ids.empty()) throw std::invalid_argument("translate --trace: the first input sentence is empty");
  NoGradGuard no_grad;
  model.eval();
  const auto S = static_cast<std::int64_t>(src_ids.size());
  const Tensor src = from_vector(src_ids, {1, S});  // (1,S)
  out << "trace: the first sentence (" << S << " source tokens), encoder (or a decoder-only model's prefill of the prompt) "
         "then greedy decoding steps with the KV cache (an rnn model: its recurrent state)\n"
      << "trace: mean, std, min and max are over the finite elements; nan and inf count the others\n\n";
  std::unique_ptr<nn::DecodeState> state;
  {
    ModuleTrace trace(model, false);
    state = model.start_decoding(src);  // the encoder reads the source (decoder-only: the prompt but its last token)
    trace.stop();
    out << format_trace_table(model.config().arch == nn::Arch::DecoderOnly ? "trace translate: prefill" : "trace translate: encoder",
                              trace.forward_rows());
  }
  std::int64_t token = state->first_tokens().to_vector<std::int64_t>()[0];  // BOS, or the prompt's last token
  for (std::int64_t step = 1; step <= steps; ++step) {
    ModuleTrace trace(model, false);
    const Tensor logits = model.decode_step(from_vector(std::vector<std::int64_t>{token}, {1, 1}), *state);  // (1,V)
    trace.stop();
    out << format_trace_table("trace translate: decoding step " + std::to_string(step) + " (input token id " +
                                  std::to_string(token) + ")",
                              trace.forward_rows());
    const std::vector<double> v = logits.to_vector<double>();
    token = static_cast<std::int64_t>(std::max_element(v.begin(), v.end()) - v.begin());  // greedy
    if (token == data::kEosId) break;
  }
  out.flush();
}

// ---- the training loop's hooks -------------------------------------------------------------------

TraceHooks::TraceHooks(TraceOptions options) : options_(std::move(options)) {}

void TraceHooks::begin() {
  if (options_.trace_steps > 0 && !options_.trace_file.empty()) {
    file_.open(options_.trace_file, std::ios::trunc);
    if (!file_) throw std::runtime_error("--trace-file: cannot open " + options_.trace_file + " for writing");
  }
}

void TraceHooks::before_forward(nn::Model& model, std::int64_t session_step, std::int64_t step) {
  if (session_step < options_.trace_steps) trace_ = std::make_unique<ModuleTrace>(model, /*gradients=*/true);
}

void TraceHooks::before_backward(const Tensor& loss, nn::Model& model, std::int64_t session_step, std::int64_t step) {
  if (session_step == 0 && !options_.dump_graph.empty()) dump_graph(loss, model, options_.dump_graph, std::cout);
}

void TraceHooks::after_backward(std::int64_t session_step, std::int64_t step) {
  if (!trace_) return;
  trace_->stop();
  write_step_trace(file_.is_open() ? static_cast<std::ostream&>(file_) : std::cerr, step, *trace_);
  trace_.reset();
}

// ---- --dump-graph --------------------------------------------------------------------------------

void dump_graph(const Tensor& loss, const nn::Module& model, const std::string& path, std::ostream& log) {
  GraphDotCounts counts;
  {
    std::ofstream out(path, std::ios::trunc);
    if (!out) throw std::runtime_error("--dump-graph: cannot open " + path + " for writing");
    counts = write_dot(loss, out, model.named_parameters());
    if (!out.flush()) throw std::runtime_error("--dump-graph: cannot write " + path);
  }
  const std::string svg = fs::path(path).replace_extension(".svg").string();
  log << "graph: wrote " << path << " (" << counts.ops << " ops, " << counts.leaves << " parameters, " << counts.edges
      << " edges)\n";
  const std::string render = "dot -Tsvg " + shell_quote(path) + " -o " + shell_quote(svg);
  if (std::system("command -v dot >/dev/null 2>&1") == 0 && std::system((render + " 2>/dev/null").c_str()) == 0)
    log << "graph: rendered " << svg << " with Graphviz\n";
  else
    log << "graph: to see it, install Graphviz (Debian: apt install graphviz) and run: " << render << "\n";
  log.flush();
}

}  // namespace sf::train
