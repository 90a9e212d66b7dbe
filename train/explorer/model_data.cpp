// The explorer's model half (data.h): translations with their top-5 alternatives, attention maps
// and one traced training step, each as JSON. Every number comes from the code the command-line
// tools use: the decoders of train/eval (decode.h, generate.h), the attention weights
// nn/attention.h captures (as `scratchformer attention` draws them) and the trace hooks of
// train/classroom/trace.h. (The Lessons page draws the demos' reports, train/lessons/demo.h.)
//
// Letters: S source length, T target length, P prompt length, L layers, H heads, V vocabulary,
// Dh head width.
#include "train/classroom/attribution.h"
#include "train/explorer/data.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "autograd/check.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
#include "nn/positional.h"
#include "nn/relative_positions.h"
#include "nn/seq2seq.h"
#include "train/checkpoint/checkpoint.h"
#include "train/classroom/attention_figures.h"
#include "train/classroom/trace.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/eval/generate.h"
#include "train/eval/sampling.h"
#include "train/run_log.h"
#include "train/optim/schedule.h"
#include "train/task.h"
#include "train/training_data.h"

namespace sf::explorer {

namespace {

constexpr std::int64_t kTopAlternatives = 5;  // alternatives shown per output token
constexpr std::int64_t kHistogramBins = 20;
constexpr double kWeightDecimals = 1e4;       // attention weights rounded to 4 decimals

// ---- small helpers ---------------------------------------------------------------------------

std::vector<std::string> pieces_of(const data::Tokenizer& tok, const std::vector<std::int64_t>& ids) {
  std::vector<std::string> out;
  for (std::int64_t id : ids) out.push_back(tok.id_to_piece(id));
  return out;
}

Tensor row_tensor(const std::vector<std::int64_t>& ids) {  // -> (1,N) int64
  return from_vector<std::int64_t>(ids, {1, static_cast<std::int64_t>(ids.size())});
}

// `text` -> ids, refusing text that is not UTF-8, has no tokens or more than `max_tokens`.
// `what` names the field in the message ("text", "target").
std::vector<std::int64_t> encode_checked(const data::Tokenizer& tok, const std::string& text, const std::string& what,
                                         std::int64_t max_tokens, bool allow_empty = false) {
  std::size_t bad = 0;
  if (!data::valid_utf8(text, &bad))
    throw std::invalid_argument(what + " is not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
  std::vector<std::int64_t> ids = tok.encode(text);
  if (ids.empty() && !allow_empty) throw std::invalid_argument(what + " has no tokens (it is empty)");
  if (static_cast<std::int64_t>(ids.size()) > max_tokens)
    throw std::invalid_argument(what + " is " + std::to_string(ids.size()) + " tokens, more than the model's limit of " +
                                std::to_string(max_tokens));
  return ids;
}

// ---- translate: the output, and per token its top-5 alternatives ----------------------------

// logits (1,N,V): row first + t predicts chosen[t]. -> per chosen token {piece, id, prob, top x5}
// (softmax over the whole vocabulary); `log_prob` receives the sum of log prob(chosen).
Json token_entries(const Tensor& logits, std::int64_t first, const std::vector<std::int64_t>& chosen,
                   const data::Tokenizer& tok, double& log_prob) {
  const std::int64_t N = logits.size(1), V = logits.size(2);
  const std::vector<double> p = softmax(logits, -1).contiguous().to_vector<double>();  // (1,N,V)
  Json out = Json::array();
  log_prob = 0;
  for (std::size_t t = 0; t < chosen.size() && first + static_cast<std::int64_t>(t) < N; ++t) {
    const double* row = p.data() + (first + static_cast<std::int64_t>(t)) * V;
    std::vector<std::int64_t> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const std::int64_t k = std::min(kTopAlternatives, V);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](std::int64_t a, std::int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    Json top = Json::array();
    for (std::int64_t i = 0; i < k; ++i)
      top.push_back({{"piece", tok.id_to_piece(order[i])}, {"id", order[i]}, {"prob", row[order[i]]}});
    const std::int64_t id = chosen[t];
    log_prob += std::log(row[id]);
    out.push_back({{"piece", tok.id_to_piece(id)}, {"id", id}, {"prob", row[id]}, {"top", top}});
  }
  return out;
}

// One teacher-forced forward over the chosen output: the encoder-decoder reads src and BOS y;
// a decoder-only model reads its prompt followed by y. chosen = y, plus EOS when it ended so.
Json teacher_forced_tokens(const nn::Model& model, const data::Tokenizer& tok, const std::vector<std::int64_t>& src,
                           const std::vector<std::int64_t>& y, bool ended_with_eos, double& log_prob) {
  NoGradGuard no_grad;
  std::vector<std::int64_t> chosen = y;
  if (ended_with_eos) chosen.push_back(data::kEosId);
  const auto max_len = static_cast<std::size_t>(model.config().max_len);
  const bool decoder_only = model.config().arch == nn::Arch::DecoderOnly;
  std::vector<std::int64_t> seq = decoder_only ? src : std::vector<std::int64_t>{data::kBosId};
  seq.insert(seq.end(), y.begin(), y.end());
  if (seq.size() > max_len) seq.resize(max_len);
  const Tensor logits = decoder_only ? model.forward(Tensor(), row_tensor(seq))        // (1,P+|y|,V)
                                     : model.forward(row_tensor(src), row_tensor(seq));  // (1,1+|y|,V)
  const std::int64_t first = decoder_only ? static_cast<std::int64_t>(src.size()) - 1 : 0;
  return token_entries(logits, first, chosen, tok, log_prob);
}

// The decoders' length limit for a source (or decoder-only prompt) of `src_len` tokens, as
// decode.cpp computes it: a shorter output ended with EOS.
std::int64_t output_limit(const nn::Model& model, std::int64_t src_len, const train::DecodeOptions& opt) {
  const bool decoder_only = model.config().arch == nn::Arch::DecoderOnly;
  const std::int64_t cached = decoder_only ? src_len - 1 : 0;
  const std::int64_t room = std::max<std::int64_t>(1, model.config().max_len - 1 - cached);
  return std::min(room, train::max_target_length(model, src_len, opt));
}

// A translation model (encoder-decoder or decoder-only, data.task translation): greedy or beam,
// the same calls `scratchformer translate` makes (translate_all -> translate_batch).
Json translate_sentence(const train::InferenceModel& im, const TranslateRequest& req) {
  if (req.mode == "sample")
    throw std::invalid_argument("mode \"sample\" is for a decoder-only language model (data.task lm); this " +
                                im.config.model.arch + " model translates: use \"greedy\" or \"beam\"");
  const train::Tokenizers& tok = *im.tokenizers;
  const std::vector<std::int64_t> src_ids = encode_checked(tok.src, req.text, "text", train::max_source_tokens(im));
  train::DecodeOptions opt;  // as translate's decode_options: beam 0 and length_penalty < 0 are the config's
  opt.beam = req.mode != "beam" ? 1 : req.beam > 0 ? req.beam : im.config.train.valid_beam;
  if (opt.beam > 16) throw std::invalid_argument("beam must be in 1..16, got " + std::to_string(opt.beam));
  opt.length_penalty = req.length_penalty >= 0 ? req.length_penalty : im.config.train.valid_length_penalty;
  const bool decoder_only = im.config.model.arch == "decoder-only";
  const std::vector<std::int64_t> src = decoder_only ? train::translation_prompt(tok, src_ids) : src_ids;
  const Tensor batch = train::pad_batch({src}, data::kPadId);  // (1,S)
  // beam: every finished hypothesis, best first (beam_search returns the first); greedy: one
  const std::vector<train::BeamHypothesis> hyps =
      opt.beam > 1 ? train::beam_search_hypotheses(*im.model, batch, opt).at(0)
                   : std::vector<train::BeamHypothesis>{{train::greedy_decode(*im.model, batch, opt).at(0), 0, 0, 0}};
  const std::vector<std::int64_t> y = hyps.empty() ? std::vector<std::int64_t>{} : hyps.front().tokens;
  const bool ended = static_cast<std::int64_t>(y.size()) < output_limit(*im.model, static_cast<std::int64_t>(src.size()), opt);
  double log_prob = 0;
  Json tokens = teacher_forced_tokens(*im.model, tok.tgt, src, y, ended, log_prob);
  const std::string text = tok.tgt.decode(y);
  Json candidates = Json::array();
  if (opt.beam <= 1) candidates.push_back({{"text", text}, {"score", log_prob}, {"log_prob", log_prob},
                                           {"length", static_cast<std::int64_t>(tokens.size())}});
  for (std::size_t k = 0; opt.beam > 1 && k < hyps.size(); ++k)
    candidates.push_back({{"text", tok.tgt.decode(hyps[k].tokens)}, {"score", hyps[k].score},
                          {"log_prob", hyps[k].log_prob}, {"length", hyps[k].length}});
  return {{"source_pieces", pieces_of(tok.src, src)}, {"text", text}, {"tokens", tokens}, {"candidates", candidates}};
}

// A decoder-only language model: the continuation `scratchformer generate` prints (the prompt
// and what follows it), greedy (mode greedy, or temperature 0) or sampled.
Json generate_text(const train::InferenceModel& im, const TranslateRequest& req) {
  if (req.mode == "beam")
    throw std::invalid_argument("mode \"beam\" is for translation; a decoder-only language model generates with \"greedy\" or \"sample\"");
  if (req.max_new < 1) throw std::invalid_argument("max_new must be >= 1, got " + std::to_string(req.max_new));
  const data::Tokenizer& tok = im.tokenizers->tgt;
  train::GenerateOptions opt;
  opt.max_new = req.max_new;
  opt.sampling = {req.mode == "greedy" ? 0.0 : req.temperature, req.top_k, req.top_p};
  train::check_sampling_options(opt.sampling);
  opt.allowed = train::generatable_tokens(tok);
  std::vector<std::int64_t> prompt{data::kBosId};
  const auto ids = encode_checked(tok, req.text, "text", im.config.model.max_len - 2, /*allow_empty=*/true);
  prompt.insert(prompt.end(), ids.begin(), ids.end());
  Generator gen(req.seed);
  const train::Generation g = train::generate(*im.model, prompt, opt, gen);
  std::vector<std::int64_t> all(prompt.begin() + 1, prompt.end());
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  double log_prob = 0;
  Json tokens = teacher_forced_tokens(*im.model, tok, prompt, g.tokens, g.stopped_at_eos, log_prob);
  const auto length = static_cast<std::int64_t>(tokens.size());
  const std::string text = tok.decode(all);
  return {{"source_pieces", pieces_of(tok, prompt)},
          {"text", text},
          {"tokens", tokens},
          {"candidates", Json::array({{{"text", text}, {"score", log_prob}, {"log_prob", log_prob}, {"length", length}}})}};
}

}  // namespace

Json translate(const train::InferenceModel& im, const TranslateRequest& req) {
  const auto start = std::chrono::steady_clock::now();
  if (req.mode != "greedy" && req.mode != "beam" && req.mode != "sample")
    throw std::invalid_argument("mode must be \"greedy\", \"beam\" or \"sample\", got \"" + req.mode + "\"");
  const std::string& arch = im.config.model.arch;
  if (arch == "encoder-only")
    throw std::invalid_argument("this model does not generate: it is an encoder-only model (data.task " +
                                im.config.data.task + "); its attention is on the Attention page");
  Json out = im.config.data.task == "translation" ? translate_sentence(im, req) : generate_text(im, req);
  out["arch"] = arch;
  out["mode"] = req.mode;
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// ---- attention ---------------------------------------------------------------------------------

namespace {

// One stack's maps (train/classroom/attention_figures.h AttentionStack: every layer's weights
// (1,H,Tq,Tk)) -> {kind, causal, layers, heads, queries, keys, weights [L][H][Tq][Tk] (4
// decimals), masked [Tq][Tk]}. A single sentence has no padding, so only a causal stack masks
// (the keys after the query: nn::causal_mask).
Json stack_json(const train::AttentionStack& stack) {
  const auto Tq = static_cast<std::int64_t>(stack.queries.size()), Tk = static_cast<std::int64_t>(stack.keys.size());
  Json weights = Json::array();
  std::int64_t H = 0;
  for (const Tensor& w : stack.layers) {  // (1,H,Tq,Tk)
    H = w.size(1);
    const std::vector<double> v = w.contiguous().to_vector<double>();
    Json layer = Json::array();
    for (std::int64_t h = 0; h < H; ++h) {
      Json head = Json::array();
      for (std::int64_t q = 0; q < Tq; ++q) {
        Json row = Json::array();
        for (std::int64_t k = 0; k < Tk; ++k) row.push_back(std::round(v[(h * Tq + q) * Tk + k] * kWeightDecimals) / kWeightDecimals);
        head.push_back(std::move(row));
      }
      layer.push_back(std::move(head));
    }
    weights.push_back(std::move(layer));
  }
  const Tensor blocked = stack.causal ? nn::causal_mask(Tq, Tk) : Tensor();  // (Tq,Tk) bool, true = blocked
  Json masked = Json::array();
  for (std::int64_t q = 0; q < Tq; ++q) {
    Json row = Json::array();
    for (std::int64_t k = 0; k < Tk; ++k) row.push_back(stack.causal && blocked.at({q, k}) != 0);
    masked.push_back(std::move(row));
  }
  return {{"kind", stack.kind}, {"causal", stack.causal}, {"layers", static_cast<std::int64_t>(stack.layers.size())},
          {"heads", H}, {"queries", stack.queries}, {"keys", stack.keys}, {"weights", std::move(weights)},
          {"masked", std::move(masked)}};
}

}  // namespace

Json attention(const train::InferenceModel& im, const std::string& text, const std::optional<std::string>& target) {
  // the weights `scratchformer attention` draws, from the same code (train/classroom/attention_figures.h)
  const train::AttentionWeights w = train::attention_weights(im, text, target, 0, {"text", "target"});
  Json stacks = Json::array();
  for (const train::AttentionStack& s : w.stacks) stacks.push_back(stack_json(s));
  return {{"arch", im.config.model.arch}, {"translation", w.translation}, {"teacher_forced", w.teacher_forced},
          {"stacks", std::move(stacks)}};
}

Json attribution(const train::InferenceModel& im, const std::string& text, const std::optional<std::string>& target) {
  const train::SentenceAttribution r = train::attribute_sentence(im, text, target, "text", "target");
  Json methods = Json::array();
  for (const auto& [key, m] : std::vector<std::pair<const char*, const train::Matrix*>>{
           {"attention_mean", &r.a.attention_mean}, {"rollout", &r.a.rollout},
           {"gradient_input", &r.a.gradient_input}, {"integrated", &r.a.integrated}})
    methods.push_back({{"key", key}, {"values", *m}});
  Json heads = Json::array();
  for (std::size_t l = 0; l < r.a.attention.size(); ++l)
    for (std::size_t h = 0; h < r.a.attention[l].size(); ++h)
      heads.push_back({{"layer", l}, {"head", h}, {"weights", r.a.attention[l][h]}, {"drop", r.a.ablation[l][h]}});
  return {{"source", r.source}, {"target", r.target}, {"translation", r.translation}, {"teacher_forced", r.teacher_forced},
          {"methods", std::move(methods)}, {"heads", std::move(heads)}, {"log_prob", r.a.log_prob},
          {"integrated_gap", r.a.integrated_gap}};
}

// ---- one training step -------------------------------------------------------------------------

namespace {

// One batch of the training split as the trainer draws it (explain-batch's way): the run's
// tokenizers (or ones trained into the cache outside the project), the split filtered as the
// trainer filters it, the trainer's Batcher (same seed, same budget), batch `index` of epoch 0.
struct LoadedBatch {
  train::Tokenizers tok;
  std::int64_t batches_per_epoch = 0;
  data::Batch batch{};
  std::int64_t ignore_index = data::kPadId;
};

LoadedBatch load_batch(const train::Config& cfg, std::int64_t index) {
  if (index < 0) throw std::invalid_argument("batch must be >= 0, got " + std::to_string(index));
  std::ostringstream log;  // which tokenizer: not needed in a response
  LoadedBatch r{.tok = train::load_or_train_tokenizers_outside_run(cfg, static_cast<std::uint64_t>(cfg.train.seed), log)};
  train::Progress quiet_progress = train::Progress::silent();  // no "train: kept ..." on the server's console
  const train::EncodedSplit split = train::load_task_split(cfg, r.tok, "train", quiet_progress);
  const train::TaskBatches task(cfg, r.tok);
  data::Batcher batcher(split.src, split.tgt, cfg.data.batch_tokens, static_cast<std::uint64_t>(cfg.train.seed), true, task.rows());
  const std::int64_t K = r.batches_per_epoch = batcher.batches_per_epoch();
  if (index >= K)
    throw std::invalid_argument("batch " + std::to_string(index) + " is past the end: epoch 0 has " + std::to_string(K) +
                                " batches (0.." + std::to_string(K - 1) + ")");
  std::vector<std::int64_t> indices;
  for (std::int64_t k = 0; k <= index; ++k) batcher.next_indices(indices);
  r.batch = task.make(split, indices, /*epoch=*/0);
  r.ignore_index = task.ignore_index();
  return r;
}

// 20 equal bins from the finite minimum to the maximum (all in bin 0 when they are equal).
Json histogram(const std::vector<double>& v, const train::TensorStats& s) {
  std::vector<std::int64_t> counts(kHistogramBins, 0);
  const bool any = std::isfinite(s.min) && std::isfinite(s.max);
  const double width = any ? (s.max - s.min) / static_cast<double>(kHistogramBins) : 0;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    const auto bin = width > 0 ? static_cast<std::int64_t>((x - s.min) / width) : 0;
    ++counts[static_cast<std::size_t>(std::clamp<std::int64_t>(bin, 0, kHistogramBins - 1))];
  }
  return {{"min", any ? Json(s.min) : Json()}, {"max", any ? Json(s.max) : Json()}, {"counts", counts}};
}

// The first n rows x n columns of t seen as (rows, last dim); a scalar is one row of one value.
Json first_values(const std::vector<double>& v, const Shape& shape, std::int64_t n) {
  const std::int64_t cols = shape.empty() ? 1 : shape.back();
  const std::int64_t rows = cols > 0 ? static_cast<std::int64_t>(v.size()) / cols : 0;
  Json out = Json::array();
  for (std::int64_t r = 0; r < std::min(rows, n); ++r) {
    Json row = Json::array();
    for (std::int64_t c = 0; c < std::min(cols, n); ++c) row.push_back(v[static_cast<std::size_t>(r * cols + c)]);
    out.push_back(std::move(row));
  }
  return out;
}

Json number_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(); }

// A trace row and its tensor -> {path, type, depth, shape, stats, histogram, values}.
Json tensor_entry(const train::TraceRow& row, const Tensor& t, std::int64_t detail_values) {
  const std::vector<double> v = t.detach().contiguous().to_vector<double>();
  const train::TensorStats& s = row.stats;
  const auto depth = row.path == "(model)" ? 0 : 1 + std::count(row.path.begin(), row.path.end(), '.');
  return {{"path", row.path},
          {"type", row.type},
          {"depth", depth},
          {"shape", row.shape},
          {"stats", {{"mean", number_or_null(s.mean)}, {"std", number_or_null(s.std)}, {"min", number_or_null(s.min)},
                     {"max", number_or_null(s.max)}, {"nan", s.nan}, {"inf", s.inf}}},
          {"histogram", histogram(v, s)},
          {"values", first_values(v, row.shape, detail_values)}};
}

// The model the trainer builds for cfg (same seed), with checkpoint's weights when one is given.
std::unique_ptr<nn::Model> step_model(const train::Config& cfg, const train::Tokenizers& tok, const std::string& checkpoint,
                                      Generator& init_gen) {
  auto model = nn::make_model(train::model_config_from(cfg, tok.src.vocab_size(), tok.tgt.vocab_size()), init_gen);
  if (!checkpoint.empty()) {
    const train::ModelCheckpoint ck = train::load_model_checkpoint(checkpoint);
    train::check_weight_dtypes(ck.model, *model, checkpoint);
    model->load_state_dict(ck.model);
  }
  model->train();
  return model;
}

// The forward rows' outputs, kept by a second hook registered after ModuleTrace's: both see the
// same calls in the same order, so outputs[i] is the tensor of trace.forward_rows()[i].
struct KeptOutputs {
  std::vector<std::string> paths;
  std::vector<Tensor> outputs;
};

Json step_entries(const train::ModuleTrace& trace, const KeptOutputs& kept, const nn::Model& model, std::int64_t n) {
  const auto& rows = trace.forward_rows();
  SF_CHECK(rows.size() == kept.outputs.size(), "step: the trace has ", rows.size(), " rows, the kept outputs ",
           kept.outputs.size());
  Json modules = Json::array(), gradients = Json::array(), parameters = Json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) modules.push_back(tensor_entry(rows[i], kept.outputs[i], n));
  const std::vector<train::TraceRow> grad_rows = trace.gradient_rows();  // reverse order, calls with a gradient
  std::size_t g = 0;
  for (std::size_t i = kept.outputs.size(); i-- > 0 && g < grad_rows.size();) {
    const Tensor& out = kept.outputs[i];
    const Tensor grad = out.requires_grad() ? out.grad() : Tensor();
    if (grad.defined()) gradients.push_back(tensor_entry(grad_rows[g++], grad, n));
  }
  for (const train::TraceRow& row : trace.parameter_gradient_rows())
    for (const auto& [name, p] : model.named_parameters())
      if (name == row.path) parameters.push_back(tensor_entry(row, p.grad(), n));
  return {{"modules", modules}, {"gradients", gradients}, {"parameters", parameters}};
}

}  // namespace

Json step(const StepRequest& req) {
  if (req.detail_values < 0 || req.detail_values > 16)
    throw std::invalid_argument("detail_values must be in 0..16, got " + std::to_string(req.detail_values));
  const train::Config& cfg = req.config;
  const LoadedBatch lb = load_batch(cfg, req.batch);
  Generator init_gen(static_cast<std::uint64_t>(cfg.train.seed));
  const auto model = step_model(cfg, lb.tok, req.checkpoint, init_gen);
  if (req.seed != 0) model->dropout_generator() = Generator(req.seed);  // else the trainer's dropout stream
  train::ModuleTrace trace(*model, /*gradients=*/true);
  KeptOutputs kept;
  nn::HookHandle keep = model->register_forward_hook_recursive([&kept](const nn::Module&, const std::string& path, const Tensor& out) {
    kept.paths.push_back(path);
    kept.outputs.push_back(out);
  });
  const data::Batch& batch = lb.batch;
  const Tensor logits = model->forward(batch.src, batch.tgt_in);  // (B,T,V), or (B,C) for classify
  const std::int64_t V = logits.size(-1);
  const Tensor loss = cross_entropy(logits.reshape({-1, V}), batch.tgt_out.reshape({-1}), lb.ignore_index, cfg.train.label_smoothing);
  loss.backward();
  trace.stop();
  keep.remove();
  Json out = step_entries(trace, kept, *model, req.detail_values);
  out["config"] = train::to_toml(cfg);
  out["loss"] = number_or_null(loss.item());
  out["batch"] = {{"index", req.batch}, {"of", lb.batches_per_epoch}, {"rows", batch.rows()},
                  {"src_len", batch.src.defined() ? batch.src.size(1) : 0},
                  {"tgt_len", batch.tgt_in.defined() ? batch.tgt_in.size(1) : 0}, {"tokens", batch.tgt_tokens}};
  out["checkpoint"] = req.checkpoint;
  return out;
}

}  // namespace sf::explorer
