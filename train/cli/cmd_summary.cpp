// `scratchformer summary --config FILE`: the model of a config, printed: module tree, parameter
// counts beside the lecture's formulas, FLOPs and KV-cache bytes (train/classroom/summary.h), with
// headings in English or Chinese (--lang).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "train/classroom/summary.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/config.h"

namespace sf::cli {

namespace {

struct SummaryArgs {
  std::string config;
  std::vector<std::string> overrides;  // --set section.key=value
  std::int64_t length = 0;             // 0 = 32
  std::int64_t batch = 1;
  std::int64_t vocab = 8000;           // used only when --vocab is given
  std::string lang = "auto";           // en | zh | auto (LANG)
};

int run_summary(const SummaryArgs& a, const CLI::App& cmd) {
  const train::Config cfg = train::load_config(a.config, a.overrides);
  const bool vocab_given = cmd.count("--vocab") > 0;
  const train::Lang lang = chinese_output(a.lang) ? train::Lang::Zh : train::Lang::En;
  std::cout << train::model_summary(cfg, vocab_given ? a.vocab : cfg.data.tokenizer_vocab_size,
                                    a.length > 0 ? a.length : 32, a.batch, lang);
  return 0;
}

}  // namespace

Command add_summary_command(CLI::App& app) {
  auto a = std::make_shared<SummaryArgs>();
  CLI::App* cmd = app.add_subcommand(
      "summary", "Module tree, parameter counts vs the lecture's formulas, FLOPs, KV cache (arch rnn: its parameter formulas)");
  cmd->add_option("--config", a->config, "Config file (TOML)")->required();
  cmd->add_option("--length", a->length, "Sequence length for FLOPs and KV cache (default: 32)");
  cmd->add_option("--batch", a->batch, "Batch size for the KV-cache bytes (default: 1)");
  cmd->add_option("--set", a->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--vocab", a->vocab, "Vocabulary size to assume (default: data.tokenizer_vocab_size)");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a, cmd] { return run_summary(*a, *cmd); }};
}

}  // namespace sf::cli
