// `scratchformer explain-batch --config FILE`: one real training batch as text: tokens, decoder
// input and target (teacher forcing), masks, counts (train/classroom/explain_batch.h), with headings
// in English or Chinese (--lang).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "train/classroom/explain_batch.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/config.h"

namespace sf::cli {

namespace {

struct ExplainArgs {
  std::string config;
  std::vector<std::string> overrides;  // --set section.key=value
  train::ExplainOptions options;
  std::string lang = "auto";  // en | zh | auto (LANG)
};

int run_explain_batch(const ExplainArgs& a) {
  const train::Config cfg = train::load_config(a.config, a.overrides);
  train::require_data_files(cfg);  // a corpus found neither beside the config nor in the data folder
  const train::Lang lang = chinese_output(a.lang) ? train::Lang::Zh : train::Lang::En;
  std::cout << train::explain_batch(cfg, a.options, std::cerr, lang);
  return 0;
}

}  // namespace

Command add_explain_batch_command(CLI::App& app) {
  auto a = std::make_shared<ExplainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "explain-batch", "Print one real training batch: tokens, decoder input and target (teacher forcing), masks, counts "
                       "(a Transformer's config; not arch rnn)");
  cmd->add_option("--config", a->config, "Config file (TOML)")->required();
  cmd->add_option("--batch", a->options.batch, "Which batch of the first epoch, 0-based (default: 0)");
  cmd->add_option("--rows", a->options.rows, "Sentence pairs to print in full (default: 3)");
  cmd->add_flag("--keep-tokenizer", a->options.keep_tokenizer,
                "A run without a tokenizer: train it into run.dir (which `train` then reuses) instead of the cache "
                "outside the project ($XDG_CACHE_HOME/scratchformer, default ~/.cache/scratchformer)");
  cmd->add_option("--set", a->overrides, "Override a config key: section.key=value (repeatable)");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a] { return run_explain_batch(*a); }};
}

}  // namespace sf::cli
