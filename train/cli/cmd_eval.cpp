// `scratchformer eval --checkpoint FILE ...`: a checkpoint measured on a held-out file.
//   translation  --src FILE --ref FILE: translates the test set and prints its corpus BLEU and chrF
//                with the sacreBLEU signatures (train/eval/bleu.h, train/eval/chrf.h), with
//                --by-length also by source-length bucket, then the teacher-forced loss, NLL and
//                perplexity on the pairs that fit the model
//   lm, mlm,     --input FILE (one sentence per line; classify: label<TAB>text[<TAB>text]): the
//   classify     loss, NLL per token and perplexity; for mlm the masked-token accuracy, for
//                classify the accuracy (train/task.h evaluate_task)
#include <cmath>
#include <cstdio>
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
#include "train/eval/chrf.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"
#include "train/task.h"

namespace sf::cli {

namespace {

struct EvalArgs {
  std::string checkpoint, src, ref, input;
  std::int64_t beam = 0;       // 0 = the config's valid_beam
  double length_penalty = -1;  // < 0 = the config's valid_length_penalty
  std::string precision = "float32";  // --precision: float32 | bf16 matrix products
  bool by_length = false;      // translation: also BLEU and chrF by source length
};

// Source-length buckets, in tokens, for --by-length.
const std::vector<std::int64_t> kLengthEdges = {11, 16, 21, 31};

void print_by_length(const std::vector<train::LengthBucket>& buckets) {
  std::cout << "by source length (tokens) / 按源句长度（词元）:\n  length    sentences  BLEU    chrF2\n";
  for (const train::LengthBucket& b : buckets) {
    const std::string range = std::to_string(b.first) + (b.last < 0 ? "+" : "-" + std::to_string(b.last));
    char line[96];
    std::snprintf(line, sizeof line, "  %-9s %9lld  %6.2f  %6.2f\n", range.c_str(), static_cast<long long>(b.sentences), b.bleu,
                  b.chrf);
    std::cout << line;
  }
}

void print_metrics(const train::TaskMetrics& m, const std::string& what) {
  std::cout << "loss " << m.loss << " nll " << m.nll << " ppl " << std::exp(m.nll);
  if (!std::isnan(m.accuracy)) std::cout << " accuracy " << 100 * m.accuracy << "%";
  std::cout << " (" << m.predictions << " " << what << ")\n";
}

// The pairs that fit the model (both sides non-empty, short enough), as the task's examples.
train::EncodedSplit fitting_pairs(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                                  const std::vector<std::string>& refs) {
  train::EncodedSplit pairs;
  const std::int64_t max_len = im.config.model.max_len;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty() || refs[i].size() > static_cast<std::size_t>(max_len) * data::kMaxBytesPerToken)
      continue;  // (a reference that long cannot fit: not tokenised, see data::kMaxBytesPerToken)
    auto t = im.tokenizers->tgt.encode(refs[i]);
    const auto joined = static_cast<std::int64_t>(ids[i].size() + t.size()) + 2;  // decoder-only: one sequence
    if (t.empty() || static_cast<std::int64_t>(t.size()) > max_len - 2 || (im.config.model.arch == "decoder-only" && joined > max_len))
      continue;
    pairs.src.push_back(ids[i]), pairs.tgt.push_back(std::move(t));
  }
  return pairs;
}

int eval_translation(const EvalArgs& a, const train::InferenceModel& im) {
  if (a.src.empty() || a.ref.empty() || !a.input.empty())
    throw std::invalid_argument("eval: a translation model takes --src FILE and --ref FILE (not --input)");
  data::ParallelCorpus corpus = data::read_parallel(a.src, a.ref);
  const auto ids = encode_inputs(corpus.src, *im.tokenizers, train::max_source_tokens(im), a.src);
  const auto hyps = translate_lines(im, ids, decode_options(im, a.beam, a.length_penalty));
  const train::BleuResult bleu = train::corpus_bleu(hyps, corpus.tgt, im.config.data.bleu_tokenize);
  std::cout << train::format_bleu(bleu) << "\n";
  std::cout << train::format_chrf(train::corpus_chrf(hyps, corpus.tgt)) << "\n";  // sacreBLEU's chrF2
  if (a.by_length) {
    std::vector<std::int64_t> lengths;
    for (const auto& row : ids) lengths.push_back(static_cast<std::int64_t>(row.size()));
    print_by_length(train::bleu_by_source_length(hyps, corpus.tgt, lengths, kLengthEdges, im.config.data.bleu_tokenize));
  }
  const train::EncodedSplit pairs = fitting_pairs(im, ids, corpus.tgt);
  if (pairs.src.empty()) throw std::invalid_argument("eval: no pair of " + a.src + " fits the model for the loss");
  const train::TaskBatches task(im.config, *im.tokenizers);
  const auto m = train::evaluate_task(*im.model, task, pairs, im.config.data.batch_tokens, im.config.train.label_smoothing);
  print_metrics(m, "target tokens, " + std::to_string(pairs.src.size()) + " pairs");
  return 0;
}

int eval_task(const EvalArgs& a, const train::InferenceModel& im) {
  const std::string& task = im.config.data.task;
  if (a.by_length) throw std::invalid_argument("eval: --by-length scores translations; this model was trained with data.task = \"" + task + "\"");
  if (a.input.empty() || !a.src.empty() || !a.ref.empty())
    throw std::invalid_argument("eval: a model trained with data.task = \"" + task + "\" takes --input FILE (" +
                                (task == "classify" ? "label<TAB>text lines" : "one sentence per line") + "), not --src/--ref");
  train::Progress progress;
  const std::int64_t max_tokens = im.config.model.max_len - 2;
  const train::EncodedSplit split =
      task == "classify" ? train::load_classify_split(a.input, im.tokenizers->src, train::class_labels(im.config.data), max_tokens,
                                                      "eval", progress)
                         : train::load_text_split(a.input, im.tokenizers->src, max_tokens, "eval", progress);
  const train::TaskBatches batches(im.config, *im.tokenizers);
  const auto m = train::evaluate_task(*im.model, batches, split, im.config.data.batch_tokens, im.config.train.label_smoothing);
  print_metrics(m, task == "lm" ? "target tokens" : task == "mlm" ? "masked tokens" : "labels");
  return 0;
}

int run_eval(const EvalArgs& a) {
  const auto precision = precision_scope(a.precision);  // decoding and the loss alike
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  return im.config.data.task == "translation" ? eval_translation(a, im) : eval_task(a, im);
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Measure a checkpoint on held-out data: BLEU and chrF (with signatures), loss and perplexity of a "
                                     "translation model; loss, perplexity and accuracy of an lm, mlm or classify model");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file")->required();
  CLI::Option* src = cmd->add_option("--src", a->src, "Translation: source sentences, one per line");
  CLI::Option* ref = cmd->add_option("--ref", a->ref, "Translation: reference translations, aligned with --src");
  src->needs(ref);
  ref->needs(src);
  cmd->add_option("--input", a->input,
                  "lm, mlm: sentences, one per line; classify: label<TAB>text or label<TAB>text_a<TAB>text_b lines")
      ->excludes(src)
      ->excludes(ref);
  cmd->add_option("--beam", a->beam, "Beam size (default: the config's train.valid_beam)")->check(beam_size_check());
  cmd->add_option("--length-penalty", a->length_penalty,
                  "Beam search length penalty alpha (default: the config's train.valid_length_penalty, which "
                  "tune-beam picks on the valid set; never tune it on the test set)")
      ->check(length_penalty_check());
  cmd->add_flag("--by-length", a->by_length,
                "Translation: also BLEU and chrF of the test sentences in buckets of source length (1-10, 11-15, 16-20, 21-30, 31+ tokens)");
  add_precision_option(cmd, a->precision);
  return {cmd, [a] { return run_eval(*a); }};
}

}  // namespace sf::cli
