// The subcommands of `scratchformer`, one file each: `scratchformer translate` is cmd_translate.cpp,
// `scratchformer explain-batch` is cmd_explain_batch.cpp, and so on (main.cpp lists them all).
//
// Each file has one public function, add_<name>_command(app): it adds the subcommand and its
// options to the program's CLI11 app and returns the Command, which main() runs if the command
// line chose it. A run function returns the program's exit status; bad input throws an exception
// whose message is one line (main() prints it and exits 2).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace sf::cli {

struct Command {
  CLI::App* app = nullptr;  // the subcommand; app->parsed() after parsing: this one was chosen
  std::function<int()> run; // runs it with the parsed options; returns the exit status
};

// In the order of `scratchformer --help`.
Command add_train_command(CLI::App& app);          // cmd_train.cpp
Command add_configs_command(CLI::App& app);        // cmd_configs.cpp
Command add_translate_command(CLI::App& app);      // cmd_translate.cpp
Command add_generate_command(CLI::App& app);       // cmd_generate.cpp
Command add_fill_mask_command(CLI::App& app);      // cmd_fill_mask.cpp
Command add_classify_command(CLI::App& app);       // cmd_classify.cpp
Command add_eval_command(CLI::App& app);           // cmd_eval.cpp
Command add_bleu_command(CLI::App& app);           // cmd_bleu.cpp
Command add_average_command(CLI::App& app);        // cmd_average.cpp
Command add_tune_beam_command(CLI::App& app);      // cmd_tune_beam.cpp
Command add_summary_command(CLI::App& app);        // cmd_summary.cpp
Command add_bench_command(CLI::App& app);          // cmd_bench.cpp
Command add_demo_command(CLI::App& app);           // cmd_demo.cpp
Command add_gradcheck_command(CLI::App& app);      // cmd_gradcheck.cpp
Command add_attention_command(CLI::App& app);      // cmd_attention.cpp
Command add_plot_command(CLI::App& app);           // cmd_plot.cpp
Command add_explain_batch_command(CLI::App& app);  // cmd_explain_batch.cpp
Command add_handout_command(CLI::App& app);        // cmd_handout.cpp
Command add_grade_command(CLI::App& app);          // cmd_grade.cpp
Command add_serve_command(CLI::App& app);          // cmd_serve.cpp
Command add_report_command(CLI::App& app);         // cmd_report.cpp

}  // namespace sf::cli
