// Attention beside attribution (attribution.h): five ways to credit source tokens with a target
// token, each a named function to put a breakpoint on.
#include "train/classroom/attribution.h"

#include <cmath>
#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/model.h"
#include "train/eval/decode.h"

namespace sf::train {

namespace {

Matrix rows_of(const Tensor& t) {  // (R, C) -> rows
  const Tensor c = t.contiguous().to(Dtype::Float64);
  const std::vector<double> v = c.to_vector<double>();
  Matrix m(static_cast<std::size_t>(t.size(0)), std::vector<double>(static_cast<std::size_t>(t.size(1))));
  for (std::size_t r = 0; r < m.size(); ++r)
    for (std::size_t k = 0; k < m[r].size(); ++k) m[r][k] = v[r * m[r].size() + k];
  return m;
}

// The token part of the encoder's input: E[src] sqrt(D), (1,S,D), detached.
Tensor token_embeddings(const nn::Seq2SeqTransformer& model, const Tensor& src) {
  const double scale = std::sqrt(static_cast<double>(model.config().d_model));
  return mul(model.src_embed->forward(src), scale).detach();
}

// x_tok (B,S,D) -> the log-probabilities of the reference tokens, (B,T): the model's forward with
// the token embeddings given (so that the autograd can differentiate with respect to them).
Tensor target_log_probs(const nn::Seq2SeqTransformer& model, const Tensor& x_tok, const Tensor& src,
                        const Tensor& tgt_in, const Tensor& tgt_out) {
  const std::int64_t B = x_tok.size(0), T = tgt_in.size(1);
  nn::Encoded enc;
  enc.src_mask = nn::padding_mask(src, model.config().pad_id).expand({B, 1, 1, src.size(1)}).contiguous();  // (B,1,1,S)
  const Tensor x = model.src_pos ? nn::add_positions(*model.src_pos, x_tok, 0) : x_tok;  // (B,S,D)
  enc.memory = model.encoder->forward(x, enc.src_mask);                                    // (B,S,D)
  const Tensor logits = model.decode(tgt_in.expand({B, T}).contiguous(), enc);            // (B,T,V)
  const std::int64_t V = logits.size(2);
  const Tensor logp = log_softmax(logits, 2).reshape({B * T * V});                         // (B*T*V)
  std::vector<std::int64_t> index;  // entry (b, t, y_t) of the flattened table
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) index.push_back((b * T + t) * V + static_cast<std::int64_t>(tgt_out.at({0, t})));
  return index_select(logp, 0, from_vector(index, {B * T})).reshape({B, T});               // (B,T)
}

// Every decoder layer's cross-attention weights, (1,H,T,S) each, and the encoder's
// self-attention weights, from one forward with capture_weights on.
struct Captured {
  std::vector<Tensor> cross, encoder_self;
};

Captured captured_weights(nn::Seq2SeqTransformer& model, const Tensor& src, const Tensor& tgt_in) {
  auto& dec = *model.decoder->layers;
  auto& enc = *model.encoder->layers;
  for (std::size_t l = 0; l < dec.size(); ++l) dec[l].cross_attn->capture_weights = true;
  for (std::size_t l = 0; l < enc.size(); ++l) enc[l].self_attn->capture_weights = true;
  {
    const NoGradGuard no_grad;
    model.forward(src, tgt_in);
  }
  Captured c;
  for (std::size_t l = 0; l < dec.size(); ++l) {
    c.cross.push_back(dec[l].cross_attn->last_weights);
    dec[l].cross_attn->capture_weights = false;
  }
  for (std::size_t l = 0; l < enc.size(); ++l) {
    c.encoder_self.push_back(enc[l].self_attn->last_weights);
    enc[l].self_attn->capture_weights = false;
  }
  return c;
}

}  // namespace

Matrix matmul_rows(const Matrix& a, const Matrix& b) {  // (R,K) @ (K,C)
  Matrix c(a.size(), std::vector<double>(b.empty() ? 0 : b[0].size(), 0.0));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < b.size(); ++k)
      for (std::size_t j = 0; j < c[i].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

// R = A_L ... A_1 with A_l = 0.5 mean_h(W_l) + 0.5 I (rows still sum to 1: the residual keeps
// half of each token where it is), then C R (T,S) with C the last decoder layer's head-mean
// cross-attention.
Matrix attention_rollout(const std::vector<Tensor>& encoder_self, const Tensor& last_cross) {
  const auto S = static_cast<std::size_t>(last_cross.size(3));
  Matrix R(S, std::vector<double>(S, 0.0));
  for (std::size_t i = 0; i < S; ++i) R[i][i] = 1;  // before any layer each token is itself
  for (const Tensor& w : encoder_self) {
    Matrix a = rows_of(mean(w.to(Dtype::Float64), {0, 1}));  // (S,S): one sentence, mean over heads
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t j = 0; j < S; ++j) a[i][j] = 0.5 * a[i][j] + (i == j ? 0.5 : 0.0);
    R = matmul_rows(a, R);
  }
  return matmul_rows(rows_of(mean(last_cross.to(Dtype::Float64), {0, 1})), R);
}

// sum_d (df_t/dx_s,d) x_s,d for every t: one backward per target token.
Matrix gradient_times_input(const nn::Seq2SeqTransformer& model, const Tensor& x_tok, const Tensor& src,
                            const Tensor& tgt_in, const Tensor& tgt_out) {
  const std::int64_t T = tgt_in.size(1);
  Matrix out;
  for (std::int64_t t = 0; t < T; ++t) {
    Tensor x = x_tok.clone().requires_grad_();                                        // (1,S,D)
    const Tensor f = target_log_probs(model, x, src, tgt_in, tgt_out).narrow(1, t, 1);  // (1,1)
    sum(f).backward();
    out.push_back(rows_of(sum(mul(x.grad(), x_tok), {2}))[0]);                        // (1,S) -> S
  }
  return out;
}

// sum_d x_s,d mean_k df_t/dx_s,d at a_k x, a_k = (k + 0.5) / steps: the steps scaled copies of
// the input are one batch, so each target token costs one forward and one backward.
Matrix integrated_gradients(const nn::Seq2SeqTransformer& model, const Tensor& x_tok, const Tensor& src,
                            const Tensor& tgt_in, const Tensor& tgt_out, std::int64_t steps) {
  const std::int64_t T = tgt_in.size(1), S = x_tok.size(1), D = x_tok.size(2);
  std::vector<double> alphas;
  for (std::int64_t k = 0; k < steps; ++k) alphas.push_back((static_cast<double>(k) + 0.5) / static_cast<double>(steps));
  const Tensor a = from_vector(alphas, {steps, 1, 1}, Dtype::Float64).to(x_tok.dtype());  // (n,1,1)
  const Tensor scaled = mul(x_tok.expand({steps, S, D}), a).detach();                     // (n,S,D)
  Matrix out;
  for (std::int64_t t = 0; t < T; ++t) {
    Tensor x = scaled.clone().requires_grad_();
    const Tensor f = target_log_probs(model, x, src, tgt_in, tgt_out).narrow(1, t, 1);   // (n,1)
    sum(f).backward();
    const Tensor mean_grad = mean(x.grad(), {0}, true);                                    // (1,S,D)
    out.push_back(rows_of(sum(mul(mean_grad, x_tok), {2}))[0]);
  }
  return out;
}

// f_t(all heads) - f_t(head h of decoder layer l's cross-attention zeroed), for every l, h, t.
// Zeroing a head's output is zeroing the Dh columns of out_proj that read it (out_proj mixes the
// concatenated heads, y = concat(heads) W^T + b), so the model itself is not changed.
std::vector<std::vector<std::vector<double>>> head_ablation(nn::Seq2SeqTransformer& model, const Tensor& src,
                                                            const Tensor& tgt_in, const Tensor& tgt_out,
                                                            const std::vector<double>& full_log_prob) {
  const NoGradGuard no_grad;
  const Tensor x_tok = token_embeddings(model, src);
  auto& dec = *model.decoder->layers;
  std::vector<std::vector<std::vector<double>>> drops(dec.size());
  for (std::size_t l = 0; l < dec.size(); ++l) {
    nn::MultiHeadAttention& cross = *dec[l].cross_attn;
    Tensor& w = cross.out_proj->weight;  // (D, H*Dh)
    const Tensor saved = w.clone();
    for (std::int64_t h = 0; h < cross.n_heads; ++h) {
      w.narrow(1, h * cross.head_dim, cross.head_dim).fill_(0.0);
      const std::vector<double> ablated =
          target_log_probs(model, x_tok, src, tgt_in, tgt_out).to(Dtype::Float64).to_vector<double>();  // (1,T)
      w.copy_(saved);
      std::vector<double> drop;
      for (std::size_t t = 0; t < ablated.size(); ++t) drop.push_back(full_log_prob[t] - ablated[t]);
      drops[l].push_back(std::move(drop));
    }
  }
  return drops;
}

Attribution attribute(nn::Seq2SeqTransformer& model, const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out,
                      std::int64_t steps) {
  if (src.dim() != 2 || src.size(0) != 1 || tgt_in.dim() != 2 || tgt_in.size(0) != 1 || tgt_out.shape() != tgt_in.shape())
    throw std::invalid_argument("attribute: expected one sentence pair, src (1,S) and tgt_in, tgt_out (1,T), got " +
                                shape_str(src.shape()) + ", " + shape_str(tgt_in.shape()) + ", " + shape_str(tgt_out.shape()));
  if (steps < 1) throw std::invalid_argument("attribute: expected at least 1 integration step, got " + std::to_string(steps));
  model.eval();
  Attribution a;
  const Captured w = captured_weights(model, src, tgt_in);
  for (const Tensor& layer : w.cross) {  // (1,H,T,S)
    std::vector<Matrix> heads;
    for (std::int64_t h = 0; h < layer.size(1); ++h) heads.push_back(rows_of(layer.narrow(1, h, 1).reshape({layer.size(2), layer.size(3)})));
    a.attention.push_back(std::move(heads));
  }
  a.attention_mean = rows_of(mean(w.cross.back().to(Dtype::Float64), {0, 1}));
  a.rollout = attention_rollout(w.encoder_self, w.cross.back());
  const Tensor x_tok = token_embeddings(model, src);
  {
    const NoGradGuard no_grad;
    a.log_prob = target_log_probs(model, x_tok, src, tgt_in, tgt_out).to(Dtype::Float64).to_vector<double>();
    const std::vector<double> at_baseline =
        target_log_probs(model, zeros_like(x_tok), src, tgt_in, tgt_out).to(Dtype::Float64).to_vector<double>();
    for (std::size_t t = 0; t < a.log_prob.size(); ++t) a.integrated_gap.push_back(a.log_prob[t] - at_baseline[t]);
  }
  a.gradient_input = gradient_times_input(model, x_tok, src, tgt_in, tgt_out);
  a.integrated = integrated_gradients(model, x_tok, src, tgt_in, tgt_out, steps);
  a.ablation = head_ablation(model, src, tgt_in, tgt_out, a.log_prob);
  return a;
}

namespace {

std::vector<std::int64_t> sentence_ids(const data::Tokenizer& tok, const std::string& text, const char* field,
                                       std::int64_t max_tokens) {
  std::size_t bad = 0;
  if (!data::valid_utf8(text, &bad))
    throw std::invalid_argument(std::string("attribution: ") + field + " is not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
  const std::vector<std::int64_t> ids = tok.encode(text);
  if (ids.empty()) throw std::invalid_argument(std::string("attribution: ") + field + " has no tokens (it is empty)");
  if (static_cast<std::int64_t>(ids.size()) > max_tokens)
    throw std::invalid_argument(std::string("attribution: ") + field + " is " + std::to_string(ids.size()) +
                                " tokens; the model takes at most " + std::to_string(max_tokens));
  return ids;
}

}  // namespace

SentenceAttribution attribute_sentence(const InferenceModel& im, const std::string& source,
                                       const std::optional<std::string>& target, const char* source_field,
                                       const char* target_field, std::int64_t steps) {
  auto* model = dynamic_cast<nn::Seq2SeqTransformer*>(im.model.get());
  if (!model)
    throw std::invalid_argument("attribution: this is a model.arch " + im.config.model.arch +
                                " model; attribution credits source tokens with target tokens, so it needs an "
                                "encoder-decoder Transformer (arch encoder-decoder)");
  const data::Tokenizers& tok = *im.tokenizers;
  const std::int64_t limit = im.config.model.max_len - 2;
  const std::vector<std::int64_t> src_ids = sentence_ids(tok.src, source, source_field, limit);
  const auto S = static_cast<std::int64_t>(src_ids.size());
  SentenceAttribution r;
  std::vector<std::int64_t> y;
  if (target) {
    y = sentence_ids(tok.tgt, *target, target_field, limit);
    r.teacher_forced = true;
  } else {
    const NoGradGuard no_grad;
    y = greedy_decode(*model, from_vector(src_ids, {1, S}), DecodeOptions{}).at(0);
    if (static_cast<std::int64_t>(y.size()) > limit) y.resize(static_cast<std::size_t>(limit));
  }
  r.translation = tok.tgt.decode(y);
  std::vector<std::int64_t> tgt_in = {data::kBosId}, tgt_out = y;
  tgt_in.insert(tgt_in.end(), y.begin(), y.end());
  tgt_out.push_back(data::kEosId);
  for (std::int64_t id : src_ids) r.source.push_back(tok.src.id_to_piece(id));
  for (std::int64_t id : tgt_out) r.target.push_back(tok.tgt.id_to_piece(id));
  const auto T = static_cast<std::int64_t>(tgt_in.size());
  r.a = attribute(*model, from_vector(src_ids, {1, S}), from_vector(tgt_in, {1, T}), from_vector(tgt_out, {1, T}), steps);
  return r;
}

std::vector<std::int64_t> row_argmax(const Matrix& m) {
  std::vector<std::int64_t> out;
  for (const auto& row : m) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < row.size(); ++k)
      if (row[k] > row[best]) best = k;
    out.push_back(static_cast<std::int64_t>(best));
  }
  return out;
}

}  // namespace sf::train
