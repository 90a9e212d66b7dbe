#include "train/eval/evaluate.h"

#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/batcher.h"

namespace sf::train {

std::vector<std::int64_t> translation_prompt(const Tokenizers& tok, const std::vector<std::int64_t>& src) {
  std::vector<std::int64_t> prompt{data::kBosId};
  prompt.insert(prompt.end(), src.begin(), src.end());
  prompt.push_back(tok.src.symbol_id("<sep>"));
  return prompt;
}

std::vector<std::string> translate_all(const nn::Model& model, const Tokenizers& tok,
                                       const std::vector<std::vector<std::int64_t>>& src, const DecodeOptions& options,
                                       std::int64_t sentences_per_batch) {
  // A decoder-only model reads the prompt <s> source <sep> and has no key padding mask, so its
  // batches hold sources of one length; the encoder-decoder pads.
  const bool prompted = model.config().arch == nn::Arch::DecoderOnly;
  // Sort by length so each batch pads little; write results back in the original order.
  std::vector<std::size_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return src[a].size() < src[b].size(); });
  // The batches: runs of `order`, each a padded (B,S) tensor, decoded side by side (translate_batches).
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // [start, end) of `order`
  std::vector<Tensor> batches;
  for (std::size_t start = 0, end = 0; start < order.size(); start = end) {
    end = std::min(order.size(), start + static_cast<std::size_t>(sentences_per_batch));
    if (prompted)  // stop at the first source of another length
      end = std::find_if(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(end),
                         [&](std::size_t i) { return src[i].size() != src[order[start]].size(); }) - order.begin();
    std::vector<std::vector<std::int64_t>> rows;
    for (std::size_t i = start; i < end; ++i) rows.push_back(prompted ? translation_prompt(tok, src[order[i]]) : src[order[i]]);
    spans.emplace_back(start, end);
    batches.push_back(pad_batch(rows, data::kPadId));
  }
  const auto ids = translate_batches(model, batches, options);
  std::vector<std::string> out(src.size());
  for (std::size_t b = 0; b < spans.size(); ++b)
    for (std::size_t i = spans[b].first; i < spans[b].second; ++i) out[order[i]] = tok.tgt.decode(ids[b][i - spans[b].first]);
  return out;
}

BleuResult evaluate_bleu(nn::Model& model, const Tokenizers& tok,
                         const std::vector<std::vector<std::int64_t>>& src, const std::vector<std::string>& references,
                         const DecodeOptions& options, const std::string& bleu_tokenize,
                         std::vector<std::string>* hypotheses) {
  const bool was_training = model.is_training();
  model.eval();
  std::vector<std::string> hyps = translate_all(model, tok, src, options);
  model.train(was_training);
  BleuResult r = corpus_bleu(hyps, references, bleu_tokenize);
  if (hypotheses) *hypotheses = std::move(hyps);
  return r;
}

}  // namespace sf::train
