// `scratchformer bleu --ref FILE < hypotheses`: sacreBLEU-compatible corpus BLEU of the
// hypotheses on stdin against the references, with the signature (train/eval/bleu.h).
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "data/corpus.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/bleu.h"

namespace sf::cli {

namespace {

struct BleuArgs {
  std::string ref;
  std::string tokenize = "13a";  // 13a or zh
};

int run_bleu(const BleuArgs& a) {
  const auto refs = data::read_lines(a.ref);
  const auto hyps = read_input_lines("");  // stdin
  if (hyps.size() != refs.size())
    throw std::invalid_argument("bleu: " + std::to_string(hyps.size()) + " hypotheses on stdin but " +
                                std::to_string(refs.size()) + " references in " + a.ref);
  std::cout << train::format_bleu(train::corpus_bleu(hyps, refs, a.tokenize)) << "\n";
  return 0;
}

}  // namespace

Command add_bleu_command(CLI::App& app) {
  auto a = std::make_shared<BleuArgs>();
  CLI::App* cmd = app.add_subcommand("bleu", "Corpus BLEU of hypotheses on stdin against references (sacreBLEU-compatible)");
  cmd->add_option("--ref", a->ref, "Reference file, one sentence per line")->required();
  cmd->add_option("--tokenize", a->tokenize, "Tokenizer: 13a (default) or zh")->check(CLI::IsMember({"13a", "zh"}));
  return {cmd, [a] { return run_bleu(*a); }};
}

}  // namespace sf::cli
