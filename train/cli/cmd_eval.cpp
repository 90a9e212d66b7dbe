// `scratchformer eval --checkpoint FILE --src FILE --ref FILE`: translates a test set and prints
// its corpus BLEU with the sacreBLEU signature (train/eval/bleu.h), then the teacher-forced loss,
// NLL and perplexity on the pairs that fit the model (train/eval/evaluate.h).
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/bleu.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"

namespace sf::cli {

namespace {

struct EvalArgs {
  std::string checkpoint, src, ref;
  std::int64_t beam = 0;  // 0 = the config's valid_beam
};
constexpr double kLengthPenalty = 1.0;  // eval has no --length-penalty: translate's default

int run_eval(const EvalArgs& a) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  data::ParallelCorpus corpus = data::read_parallel(a.src, a.ref);
  const auto ids = encode_inputs(corpus.src, *im.tokenizers, im.config.model.max_len - 2, a.src);
  const auto hyps = translate_lines(im, ids, decode_options(im, a.beam, kLengthPenalty));
  const train::BleuResult bleu = train::corpus_bleu(hyps, corpus.tgt, im.config.data.bleu_tokenize);
  std::cout << train::format_bleu(bleu) << "\n";
  // teacher-forced loss on the pairs that fit the model
  std::vector<std::vector<std::int64_t>> src, tgt;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty() || corpus.tgt[i].size() > static_cast<std::size_t>(im.config.model.max_len) * data::kMaxBytesPerToken)
      continue;  // (a reference that long cannot fit: not tokenised, see data::kMaxBytesPerToken)
    auto t = im.tokenizers->tgt.encode(corpus.tgt[i]);
    if (ids[i].empty() || t.empty() || static_cast<std::int64_t>(t.size()) > im.config.model.max_len - 2) continue;
    src.push_back(ids[i]);
    tgt.push_back(std::move(t));
  }
  const auto loss = train::evaluate_loss(*im.model, src, tgt, im.config.data.batch_tokens, im.config.train.label_smoothing);
  std::cout << "loss " << loss.loss << " nll " << loss.nll << " ppl " << std::exp(loss.nll) << " (" << loss.tokens
            << " target tokens, " << src.size() << " pairs)\n";
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "BLEU (with signature), loss and perplexity of a checkpoint on a test set");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file")->required();
  cmd->add_option("--src", a->src, "Source sentences, one per line")->required();
  cmd->add_option("--ref", a->ref, "Reference translations, aligned with --src")->required();
  cmd->add_option("--beam", a->beam, "Beam size (default: the config's train.valid_beam)")->check(beam_size_check());
  return {cmd, [a] { return run_eval(*a); }};
}

}  // namespace sf::cli
