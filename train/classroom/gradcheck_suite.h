// The gradient-check suite behind `scratchformer gradcheck`: every op and module of the course,
// checked in float64 against finite differences (sf::gradcheck, autograd/gradcheck.h), with a
// table a student can read.
//
// Each entry of the registry is one topic of the lecture ("embedding", "attention_causal_mask",
// "gqa", "decoder_layer", "model", ...); the entries named like the exercises of exercise mode
// (matmul, linear, softmax, layer_norm, embedding, cross_entropy, relu: the same words as their
// ctest labels) check that op's backward. Its function builds small float64 inputs and modules
// from fixed seeds, runs sf::gradcheck on them (one or more times: a "variant" per run, e.g.
// the four pre/post x LayerNorm/RMSNorm combinations of a layer) and returns what it found.
// Element-wise checking everywhere except the whole model, which uses gradcheck's fast mode
// (random directions) to stay quick.
//
// The suite is the one list of these checks: tests/test_gradcheck_suite.cpp runs each entry as a
// test case with the entry's ctest labels, and the op and layer tests do not repeat them.
//
//   for (const GradcheckEntry& e : gradcheck_suite()) {
//     std::vector<GradcheckCase> cases = e.run(GradcheckOptions{});
//     ...  // cases[i].result.ok, cases[i].result.inputs[j].max_abs_error
//   }
//
// Run the checks from the command line with `scratchformer gradcheck [--module NAME]`.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"

namespace sf::train {

// One gradcheck run inside an entry.
struct GradcheckCase {
  std::string variant;                   // e.g. "pre-norm layernorm"; empty when the entry has one run
  std::vector<std::string> input_names;  // one per input that requires grad, in order ("x",
                                         // "self_attn.q_proj.weight", ...)
  std::vector<Shape> input_shapes;       // the same inputs' shapes
  GradcheckResult result;                // gradcheck's report: result.inputs[i] belongs to input_names[i]
};

// One named check of the suite.
struct GradcheckEntry {
  std::string name;         // what --module takes, e.g. "attention_causal_mask"
  std::string topic;        // the lecture topic it belongs to, e.g. "attention"; --module takes it too
  std::string description;  // one line, shown by --list
  // Builds the inputs (fixed seeds) and runs the check(s). `tolerances` supplies eps, atol and
  // rtol (the defaults are torch's); the entry itself decides fast_mode.
  std::function<std::vector<GradcheckCase>(const GradcheckOptions& tolerances)> run;
};

// The entries named after the exercises that gradcheck_suite.cpp does not already have
// (exercise_checks.cpp); make_suite() appends them.
std::vector<GradcheckEntry> exercise_gradcheck_entries();

// Every entry, in the order of the course.
const std::vector<GradcheckEntry>& gradcheck_suite();
// The entry called `name`, or nullptr.
const GradcheckEntry* find_gradcheck(const std::string& name);
// "embedding, attention_no_mask, ...": the valid names, for error messages.
std::string gradcheck_names();

// One row of the table: one input of one run.
struct GradcheckRow {
  std::string module;  // entry name, plus " (variant)" when there is one
  std::string input;   // parameter or input name
  Shape shape;
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool ok = true;
};

// The rows of one entry's cases, in order.
std::vector<GradcheckRow> gradcheck_rows(const GradcheckEntry& entry, const std::vector<GradcheckCase>& cases);

// Runs `entries` in order, then prints the table to `out`: the pass rule, one row per input
// (module, parameter or input, shape, max abs error, max rel error, pass/FAIL), a summary line
// and, for each failed run, gradcheck's message saying at which element numeric and analytic
// differ. Returns true if every check passed.
bool run_gradcheck_table(const std::vector<const GradcheckEntry*>& entries, std::ostream& out,
                         const GradcheckOptions& tolerances = {});

// --list: "name  topic  description", one line per entry, aligned.
std::string format_gradcheck_list(const std::vector<GradcheckEntry>& entries);

}  // namespace sf::train
