// scratchformer: the command-line program. main() builds the command line from the subcommands,
// parses it, starts MPI when run under mpirun, and runs the chosen subcommand. Each subcommand
// is one file here (commands.h declares them; cli_util.h holds what several share):
//
//   train          cmd_train.cpp          train a model from a config file (translation, lm, mlm, classify)
//   configs        cmd_configs.cpp        the configs `train --config NAME` finds by name, and their folder
//   translate      cmd_translate.cpp      translate sentences with a trained checkpoint
//   generate       cmd_generate.cpp       continue a prompt with a decoder-only model (prefill, decode)
//   fill-mask      cmd_fill_mask.cpp      the tokens a masked-LM encoder predicts behind each <mask>
//   classify       cmd_classify.cpp       the label of each line by an encoder-only classifier
//   eval           cmd_eval.cpp           BLEU / loss, perplexity and accuracy of a checkpoint on held-out data
//   bleu           cmd_bleu.cpp           sacreBLEU-compatible corpus BLEU (or chrF) of hypotheses against references
//   average        cmd_average.cpp        the mean of the weights of several checkpoints of one model
//   tune-beam      cmd_tune_beam.cpp      beam search's length penalty picked on the valid set
//   summary        cmd_summary.cpp        the model of a config: module tree, parameter counts, FLOPs, KV-cache bytes
//   bench          cmd_bench.cpp          training-step and decoding speed of a reference model, next to BLAS
//   demo           cmd_demo.cpp           one of the lecture's claims run as a demo: its numbers, an SVG
//
// For the classroom and the debugger:
//   gradcheck      cmd_gradcheck.cpp      float64 gradient checks of every op and module, as a table (exit 1 on a failure)
//   attention      cmd_attention.cpp      cross- and self-attention heatmaps of one sentence, per layer and head (SVG)
//   plot           cmd_plot.cpp           training curves of a run, or a config's positional encodings / LR schedule (SVG)
//   explain-batch  cmd_explain_batch.cpp  one real training batch as text: tokens, teacher forcing, masks, counts
//   handout        cmd_handout.cpp        a copy of the source with chosen exercises' solutions cut out
//   grade          cmd_grade.cpp          grade a handout's exercises: gradcheck and tests of each, a GRADE line
//   serve          cmd_serve.cpp          the explorer in the browser (train/explorer): runs, translations, attention
//   report         cmd_report.cpp         the explorer's views that need no live model, as one HTML file
//
// Bad input (command line, config, corpus, checkpoint) prints one line to stderr and exits 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"
#include "train/cli/commands.h"
#include "train/config.h"
#include "train/distributed/distributed.h"

namespace {

using namespace sf;

// The first argument of the command line that nothing took, when it names a command or an
// option that does not exist: `scratchformer trian` or `bleu --refs r`. Its kind ("command" or
// "option"), the name of the command it was given to, and the names that do exist there.
struct UnknownName {
  std::string name, kind, command;
  std::vector<std::string> known;
};
UnknownName unknown_name(const CLI::App& app) {
  const CLI::App* command = &app;
  for (const CLI::App* sub : app.get_subcommands()) command = sub;  // the subcommand parsed, if any
  const std::vector<std::string> left = command->remaining();
  if (left.empty()) return {};
  const std::string& arg = left.front();
  UnknownName u{"", "", command == &app ? "scratchformer" : command->get_name(), {}};
  if (arg.size() > 1 && arg[0] == '-') {
    u.name = arg.substr(0, arg.find('=')), u.kind = "option";  // --refs=x names --refs
    for (const CLI::Option* option : command->get_options())
      if (!option->get_lnames().empty()) u.known.push_back("--" + option->get_lnames().front());
  } else if (command == &app) {  // a word where the command should be
    u.name = arg, u.kind = "command";
    for (const CLI::App* sub : app.get_subcommands({})) u.known.push_back(sub->get_name());
  }
  return u;
}

// A command line CLI11 refused: help and version go to stdout with status 0; a bad command line
// is one line on stderr, status 2. An unknown command or option is named first, with the closest
// known one: CLI11 checks the required options before the unexpected arguments, so `bleu --refs
// r` would otherwise say only that --ref is missing.
int report_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::string what = e.what();
  std::replace(what.begin(), what.end(), '\n', ' ');
  if (const UnknownName u = unknown_name(app); !u.name.empty()) {
    const std::string near = train::closest(u.name, u.known);
    what = u.command + " has no " + u.kind + " " + u.name + (near.empty() ? "" : " (did you mean " + near + "?)");
  }
  std::cerr << "scratchformer: error: " << what << " (run with --help to see the options)\n";
  return 2;
}

// A command that failed: one line on stderr, status 2. On one of several ranks it ends them all
// (they would wait for this one forever).
int report_error(const std::exception& e) {
  if (train::world_size() > 1)
    train::abort_job(2, "scratchformer: error on rank " + std::to_string(train::rank()) + " of " +
                            std::to_string(train::world_size()) + ": " + e.what());
  std::cerr << "scratchformer: error: " << e.what() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sf::restart_with_native_blas(argv);  // OpenBLAS's generic kernels on a CPU it does not know (blas_core.h)
  CLI::App app{"Scratchformer: a from-scratch C++ Transformer for learning how translation models work.\n"
               "Run `scratchformer COMMAND --help` for a command's options."};
  app.set_version_flag("--version", std::string("scratchformer ") + SCRATCHFORMER_VERSION);
  app.require_subcommand(0, 1);
  // in the order `scratchformer --help` lists them
  const std::vector<cli::Command> commands = {
      cli::add_train_command(app),     cli::add_configs_command(app),   cli::add_translate_command(app), cli::add_generate_command(app),
      cli::add_fill_mask_command(app), cli::add_classify_command(app),  cli::add_eval_command(app),
      cli::add_bleu_command(app),      cli::add_average_command(app),   cli::add_tune_beam_command(app), cli::add_summary_command(app),
      cli::add_bench_command(app),     cli::add_demo_command(app),      cli::add_gradcheck_command(app),
      cli::add_attention_command(app), cli::add_plot_command(app),      cli::add_explain_batch_command(app),
      cli::add_handout_command(app),   cli::add_grade_command(app),
      cli::add_serve_command(app),     cli::add_report_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e);
  }
  // MPI, when started by mpirun (data-parallel training, train/distributed/distributed.h); finalized when main
  // returns. Without mpirun this does nothing.
  std::optional<train::DistributedScope> distributed;
  try {
    distributed.emplace(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "scratchformer: error: " << e.what() << "\n";
    return 2;
  }
  try {
    init_threads();
    for (const cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
    std::cout << app.help();  // no subcommand
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}
