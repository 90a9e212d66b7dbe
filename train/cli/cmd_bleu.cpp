// `scratchformer bleu --ref FILE < hypotheses`: sacreBLEU-compatible corpus BLEU of the
// hypotheses on stdin against the references, with the signature (train/eval/bleu.h); with
// `--metric chrf` (or chrf++) sacreBLEU's chrF2 (chrF2++) instead (train/eval/chrf.h):
//   scratchformer bleu --metric chrf --ref test.en < hyp.txt
//   chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 58.23
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "data/corpus.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/bleu.h"
#include "train/eval/chrf.h"

namespace sf::cli {

namespace {

struct BleuArgs {
  std::string ref;
  std::string tokenize = "13a";  // 13a or zh (BLEU only: chrF needs no tokenizer)
  std::string metric = "bleu";   // bleu, chrf or chrf++
};

int run_bleu(const BleuArgs& a) {
  const auto refs = data::read_lines(a.ref);
  const auto hyps = read_input_lines("");  // stdin
  if (hyps.size() != refs.size())
    throw std::invalid_argument("bleu: " + std::to_string(hyps.size()) + " hypotheses on stdin but " +
                                std::to_string(refs.size()) + " references in " + a.ref);
  if (a.metric == "bleu") {
    std::cout << train::format_bleu(train::corpus_bleu(hyps, refs, a.tokenize)) << "\n";
  } else {
    train::ChrfOptions options;  // sacreBLEU's defaults: chrF2
    if (a.metric == "chrf++") options.word_order = 2;
    std::cout << train::format_chrf(train::corpus_chrf(hyps, refs, options)) << "\n";
  }
  return 0;
}

}  // namespace

Command add_bleu_command(CLI::App& app) {
  auto a = std::make_shared<BleuArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bleu", "Corpus BLEU (or chrF) of hypotheses on stdin against references (sacreBLEU-compatible)");
  cmd->add_option("--ref", a->ref, "Reference file, one sentence per line")->required();
  CLI::Option* tokenize =
      cmd->add_option("--tokenize", a->tokenize, "BLEU tokenizer: 13a (default) or zh")->check(CLI::IsMember({"13a", "zh"}));
  cmd->add_option("--metric", a->metric,
                  "bleu (default), chrf (sacreBLEU's chrF2: character 6-grams, beta 2) or chrf++ (chrF2++: "
                  "plus word 1- and 2-grams)")
      ->check(CLI::IsMember({"bleu", "chrf", "chrf++"}));
  cmd->callback([a, tokenize] {
    if (a->metric != "bleu" && tokenize->count() > 0)
      throw CLI::ValidationError("--tokenize", "chrF compares characters and takes no tokenizer (BLEU only)");
  });
  return {cmd, [a] { return run_bleu(*a); }};
}

}  // namespace sf::cli
