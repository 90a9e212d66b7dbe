#include "train/eval/evaluate.h"

#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/batcher.h"

namespace sf::train {

LossResult evaluate_loss(nn::Model& model, const std::vector<std::vector<std::int64_t>>& src,
                         const std::vector<std::vector<std::int64_t>>& tgt, std::int64_t batch_tokens,
                         double label_smoothing) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  data::Batcher batcher(src, tgt, batch_tokens, 0, /*shuffle=*/false);
  LossResult r;
  double loss_sum = 0, nll_sum = 0;
  data::Batch batch;
  while (batcher.next(batch)) {
    Tensor logits = model.forward(batch.src, batch.tgt_in);  // (B,T,V)
    Tensor flat = logits.reshape({-1, logits.size(-1)});
    Tensor targets = batch.tgt_out.reshape({-1});
    const double n = static_cast<double>(batch.tgt_tokens);
    loss_sum += cross_entropy(flat, targets, data::kPadId, label_smoothing).item() * n;  // mean -> sum
    nll_sum += cross_entropy(flat, targets, data::kPadId, 0.0).item() * n;
    r.tokens += batch.tgt_tokens;
  }
  if (r.tokens > 0) {
    r.loss = loss_sum / static_cast<double>(r.tokens);
    r.nll = nll_sum / static_cast<double>(r.tokens);
  }
  model.train(was_training);
  return r;
}

std::vector<std::string> translate_all(const nn::Model& model, const Tokenizers& tok,
                                       const std::vector<std::vector<std::int64_t>>& src, const DecodeOptions& options,
                                       std::int64_t sentences_per_batch) {
  // Sort by length so each batch pads little; write results back in the original order.
  std::vector<std::size_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return src[a].size() < src[b].size(); });
  std::vector<std::string> out(src.size());
  for (std::size_t start = 0; start < order.size(); start += static_cast<std::size_t>(sentences_per_batch)) {
    const std::size_t end = std::min(order.size(), start + static_cast<std::size_t>(sentences_per_batch));
    std::vector<std::vector<std::int64_t>> rows;
    for (std::size_t i = start; i < end; ++i) rows.push_back(src[order[i]]);
    const auto ids = translate_batch(model, pad_batch(rows, data::kPadId), options);
    for (std::size_t i = start; i < end; ++i) out[order[i]] = tok.tgt.decode(ids[i - start]);
  }
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
