#include "nn/seq2seq.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/check.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/positional.h"

namespace sf::nn {

// Letters: B batch, S source length, T target length, D d_model, Hkv key/value heads,
// Dh head width, V target vocabulary.

// ---- DecoderCache ------------------------------------------------------------------------

void DecoderCache::reorder(const Tensor& batch_indices) {
  check_batch_indices(batch_indices, "DecoderCache::reorder");
  for (LayerCache& layer : layers) {
    reorder_kv(layer.self, batch_indices);
    reorder_kv(layer.cross, batch_indices);
  }
}

void DecoderCache::reorder_self(const Tensor& batch_indices) {
  check_batch_indices(batch_indices, "DecoderCache::reorder_self");
  for (LayerCache& layer : layers) reorder_kv(layer.self, batch_indices);
}

// ---- Seq2SeqTransformer ------------------------------------------------------------------

namespace {

// The config itself, after validate() (so the constructor checks it before anything else).
const ModelConfig& validated(const ModelConfig& cfg) {
  cfg.validate();
  return cfg;
}

}  // namespace

Seq2SeqTransformer::Seq2SeqTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype)
    : cfg_(validated(cfg)), dropout_gen_(init_gen.next_u64()) {
  // Parameters are drawn in this order: embeddings, positions, encoder, decoder, output.
  src_embed = register_module("src_embed",
                              std::make_shared<Embedding>(cfg.src_vocab, cfg.d_model, init_gen, cfg.pad_id, dtype));
  tgt_embed = cfg.share_embeddings
                  ? src_embed  // one table; named_parameters lists it once, as src_embed.weight
                  : std::make_shared<Embedding>(cfg.tgt_vocab, cfg.d_model, init_gen, cfg.pad_id, dtype);
  register_module("tgt_embed", tgt_embed);
  src_pos = make_positions(cfg, init_gen, dtype);
  tgt_pos = make_positions(cfg, init_gen, dtype);
  if (src_pos) register_module("src_pos", src_pos);
  if (tgt_pos) register_module("tgt_pos", tgt_pos);
  encoder = register_module("encoder", std::make_shared<Encoder>(cfg, init_gen, dropout_gen_, dtype));
  decoder = register_module("decoder", std::make_shared<Decoder>(cfg, init_gen, dropout_gen_, dtype));
  if (!cfg.tie_output)
    output_proj = register_module("output_proj",
                                  std::make_shared<Linear>(cfg.d_model, cfg.tgt_vocab, init_gen, false, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
}

void Seq2SeqTransformer::check_ids(const char* what, const Tensor& ids) const {
  SF_EXPECT(ids.defined() && ids.dim() == 2 && ids.dtype() == Dtype::Int64, "Seq2SeqTransformer: expected ", what,
            " token ids of shape (B,T) and dtype int64, got ",
            ids.defined() ? std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape())
                          : "an undefined tensor");
}

// ids: (B,T) int64 -> (B,T,D)
Tensor Seq2SeqTransformer::embed(const Embedding& table, const Module* positions, const Tensor& ids,
                                 std::int64_t start_pos) const {
  Tensor x = mul(table.forward(ids), std::sqrt(static_cast<double>(cfg_.d_model)));  // (B,T,D)
  if (positions) x = add_positions(*positions, x, start_pos);
  return dropout->forward(x);
}

// h: (B,T,D) -> (B,T,V)
Tensor Seq2SeqTransformer::project(const Tensor& h) const {
  if (output_proj) return output_proj->forward(h);
  return linear(h, tgt_embed->weight);  // tied: h E^T, (B,T,D) @ (D,V); no bias (autograd/ops_linear.cpp)
}

// src: (B,S) int64 -> memory (B,S,D), src_mask (B,1,1,S)
Encoded Seq2SeqTransformer::encode(const Tensor& src) const {
  check_ids("source", src);
  Encoded enc;
  enc.src_mask = padding_mask(src, cfg_.pad_id);                         // (B,1,1,S)
  const Tensor x = embed(*src_embed, src_pos.get(), src, 0);             // (B,S,D)
  enc.memory = encoder->forward(x, enc.src_mask);                        // (B,S,D)
  return enc;
}

// tgt_in: (B,T) int64 -> (B,T,V)
Tensor Seq2SeqTransformer::decode(const Tensor& tgt_in, const Encoded& enc) const {
  check_ids("target", tgt_in);
  SF_EXPECT(enc.memory.defined() && enc.memory.size(0) == tgt_in.size(0), "Seq2SeqTransformer: target batch ",
            tgt_in.size(0), " does not match the encoder output ",
            (enc.memory.defined() ? shape_str(enc.memory.shape()) : std::string("(undefined)")));
  const std::int64_t T = tgt_in.size(1);
  const Tensor y = embed(*tgt_embed, tgt_pos.get(), tgt_in, 0);           // (B,T,D)
  const Tensor self_mask = causal_mask(T, T);                            // (T,T), TRUE = future
  const Tensor h = decoder->forward(y, enc.memory, self_mask, enc.src_mask);  // (B,T,D)
  return project(h);                                                     // (B,T,V)
}

// src: (B,S), tgt_in: (B,T) -> (B,T,V)
Tensor Seq2SeqTransformer::forward(const Tensor& src, const Tensor& tgt_in) const {
  return run_forward_hooks(decode(tgt_in, encode(src)));
}

DecoderCache Seq2SeqTransformer::new_cache() const {
  DecoderCache cache;
  cache.layers.resize(static_cast<std::size_t>(cfg_.decoder_layers));
  return cache;
}

// tokens: (B,1) int64 -> (B,V)
Tensor Seq2SeqTransformer::decode_step(const Tensor& tokens, const Encoded& enc, DecoderCache& cache) const {
  check_ids("the newest", tokens);
  if (tokens.size(1) != 1)
    throw std::invalid_argument("Seq2SeqTransformer::decode_step: expected one new token per row, (B,1), got " +
                                shape_str(tokens.shape()));
  if (!enc.src_mask.defined() || enc.src_mask.size(0) != tokens.size(0))
    throw std::invalid_argument("Seq2SeqTransformer::decode_step: token batch " + std::to_string(tokens.size(0)) +
                                " does not match the encoder output's mask " +
                                (enc.src_mask.defined() ? shape_str(enc.src_mask.shape()) : std::string("(undefined)")));
  if (cache.layers.empty()) cache = new_cache();
  const std::int64_t start_pos = cache.length();  // this token's position
  const std::int64_t B = tokens.size(0);
  const Tensor y = embed(*tgt_embed, tgt_pos.get(), tokens, start_pos);  // (B,1,D)
  // One query at the newest position sees every cached key and itself: no mask needed.
  const Tensor h = decoder->forward(y, enc.memory, Tensor(), enc.src_mask, &cache.layers, start_pos);  // (B,1,D)
  return reshape(project(h), {B, -1});  // (B,1,V) -> (B,V)
}

// ---- generation through the Model interface (nn/model.h) ---------------------------------

std::unique_ptr<DecodeState> Seq2SeqTransformer::start_decoding(const Tensor& src) const {
  auto state = std::make_unique<EncoderDecoderState>();
  state->enc = encode(src);  // memory: (B,S,D), read once
  state->cache = new_cache();
  // every decoder layer projects the memory into its cross-attention keys and values once:
  // with the encoder, the prefill (the steps then only read them)
  for (std::size_t l = 0; l < state->cache.layers.size(); ++l)
    (*decoder->layers)[l].cross_attn->fill_static_cache(state->enc.memory, state->cache.layers[l].cross);
  state->bos = full({src.size(0), 1}, static_cast<double>(cfg_.bos_id), Dtype::Int64);
  for (std::int64_t b = 0; b < src.size(0); ++b) state->row_source.push_back(b);
  return state;
}

// The state of an encoder-decoder model, or an error naming what was passed instead.
static EncoderDecoderState& own_state(DecodeState& state) {
  auto* s = dynamic_cast<EncoderDecoderState*>(&state);
  if (!s) throw std::invalid_argument("Seq2SeqTransformer: expected the DecodeState of start_decoding()");
  return *s;
}

// tokens: (B,1) int64 -> (B,V)
Tensor Seq2SeqTransformer::decode_step(const Tensor& tokens, DecodeState& state) const {
  EncoderDecoderState& s = own_state(state);
  return decode_step(tokens, s.enc, s.cache);
}

// prefix: (B,T) int64 -> (B,T,V)
Tensor Seq2SeqTransformer::decode_prefix(const Tensor& prefix, const DecodeState& state) const {
  return decode(prefix, own_state(const_cast<DecodeState&>(state)).enc);
}

// memory (B,S,D) and mask (B,1,1,S) -> (B*times, ...), row b*times + k = row b
void EncoderDecoderState::repeat_rows(std::int64_t times) {
  if (times < 1)
    throw std::invalid_argument("EncoderDecoderState::repeat_rows: expected times >= 1, got " + std::to_string(times));
  const std::int64_t B = enc.memory.size(0);
  std::vector<std::int64_t> idx, source;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < times; ++k) idx.push_back(b), source.push_back(row_source.at(b));
  const Tensor index = from_vector<std::int64_t>(idx, {B * times});
  enc = {index_select(enc.memory, 0, index), index_select(enc.src_mask, 0, index)};
  bos = index_select(bos, 0, index);
  cache.reorder(index);
  row_source = std::move(source);
}

// batch_indices (B): row r takes the self-attention cache of row batch_indices[r], a row of the
// same sentence. What every row of a sentence holds alike stays in place.
void EncoderDecoderState::reorder(const Tensor& batch_indices) {
  check_batch_indices(batch_indices, "EncoderDecoderState::reorder");
  const auto rows = static_cast<std::int64_t>(row_source.size());
  if (batch_indices.size(0) != rows)
    throw std::invalid_argument("EncoderDecoderState::reorder: expected " + std::to_string(rows) +
                                " batch indices (one per row), got " + std::to_string(batch_indices.size(0)));
  const auto from = batch_indices.contiguous().to_vector<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (from[r] < 0 || from[r] >= rows)
      throw std::invalid_argument("EncoderDecoderState::reorder: row " + std::to_string(r) + " would take row " +
                                  std::to_string(from[r]) + ", expected a row in [0, " + std::to_string(rows) + ")");
    if (row_source[from[r]] != row_source[r])
      throw std::invalid_argument("EncoderDecoderState::reorder: row " + std::to_string(r) + " reads source sentence " +
                                  std::to_string(row_source[r]) + " but would take the cache of row " +
                                  std::to_string(from[r]) + ", which reads sentence " +
                                  std::to_string(row_source[from[r]]) +
                                  "; only the rows of one sentence (its beams) may be exchanged");
  }
  cache.reorder_self(batch_indices);
}

std::string Seq2SeqTransformer::summary() const { return module_tree_summary(*this); }

}  // namespace sf::nn
