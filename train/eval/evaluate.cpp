#include "train/eval/evaluate.h"

#include <algorithm>
#include <numeric>

#include "autograd/check.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/batcher.h"
#include "train/eval/chrf.h"

namespace sf::train {

std::vector<std::int64_t> translation_prompt(const Tokenizers& tok, const std::vector<std::int64_t>& src) {
  std::vector<std::int64_t> prompt{data::kBosId};
  prompt.insert(prompt.end(), src.begin(), src.end());
  prompt.push_back(tok.src.symbol_id("<sep>"));
  return prompt;
}

SortedBatches sort_into_batches(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t per_batch,
                                bool same_length) {
  SortedBatches r;
  r.order.resize(rows.size());
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a].size() < rows[b].size(); });
  for (std::size_t start = 0, end = 0; start < r.order.size(); start = end) {
    end = std::min(r.order.size(), start + static_cast<std::size_t>(per_batch));
    if (same_length)  // stop at the first row of another length
      end = static_cast<std::size_t>(
          std::find_if(r.order.begin() + static_cast<std::ptrdiff_t>(start),
                       r.order.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](std::size_t i) { return rows[i].size() != rows[r.order[start]].size(); }) -
          r.order.begin());
    std::vector<std::vector<std::int64_t>> batch;
    for (std::size_t i = start; i < end; ++i) batch.push_back(rows[r.order[i]]);
    r.spans.emplace_back(start, end);
    r.batches.push_back(pad_batch(batch, data::kPadId));
  }
  return r;
}

std::vector<std::string> translate_all(const nn::Model& model, const Tokenizers& tok,
                                       const std::vector<std::vector<std::int64_t>>& src, const DecodeOptions& options,
                                       std::int64_t sentences_per_batch) {
  // A decoder-only model reads the prompt <s> source <sep> and has no key padding mask, so its
  // batches hold prompts of one length; the encoder-decoder pads its sources.
  const bool prompted = model.config().arch == nn::Arch::DecoderOnly;
  std::vector<std::vector<std::int64_t>> prompts;
  if (prompted)
    for (const auto& s : src) prompts.push_back(translation_prompt(tok, s));
  // Sorted by length so each batch pads little, decoded side by side (translate_batches); the
  // results go back in the original order.
  const SortedBatches sorted = sort_into_batches(prompted ? prompts : src, sentences_per_batch, prompted);
  const auto ids = translate_batches(model, sorted.batches, options);
  std::vector<std::string> out(src.size());
  for (std::size_t b = 0; b < sorted.spans.size(); ++b)
    for (std::size_t i = sorted.spans[b].first; i < sorted.spans[b].second; ++i)
      out[sorted.order[i]] = tok.tgt.decode(ids[b][i - sorted.spans[b].first]);
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

std::vector<LengthBucket> bleu_by_source_length(const std::vector<std::string>& hypotheses,
                                                const std::vector<std::string>& references,
                                                const std::vector<std::int64_t>& source_lengths,
                                                const std::vector<std::int64_t>& edges, const std::string& bleu_tokenize) {
  SF_EXPECT(hypotheses.size() == references.size() && references.size() == source_lengths.size(),
            "bleu_by_source_length: expected as many hypotheses, references and lengths, got ", hypotheses.size(), ", ",
            references.size(), ", ", source_lengths.size());
  SF_EXPECT(std::is_sorted(edges.begin(), edges.end()) && (edges.empty() || edges.front() > 1),
            "bleu_by_source_length: expected ascending bucket edges above 1");
  std::vector<LengthBucket> buckets;
  std::int64_t first = 1;
  for (std::size_t b = 0; b <= edges.size(); ++b) {
    const std::int64_t last = b < edges.size() ? edges[b] - 1 : -1;
    std::vector<std::string> hyps, refs;
    for (std::size_t i = 0; i < hypotheses.size(); ++i)
      if ((b == 0 || source_lengths[i] >= first) && (last < 0 || source_lengths[i] <= last))  // (an empty source: the first)
        hyps.push_back(hypotheses[i]), refs.push_back(references[i]);
    LengthBucket bucket{first, last, static_cast<std::int64_t>(hyps.size()), 0, 0};
    if (!hyps.empty())
      bucket.bleu = corpus_bleu(hyps, refs, bleu_tokenize).score, bucket.chrf = corpus_chrf(hyps, refs).score;
    buckets.push_back(bucket);
    if (b < edges.size()) first = edges[b];
  }
  return buckets;
}

}  // namespace sf::train
