#include "nn/model.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>
#include <stdexcept>

#include "autograd/check.h"
#include "autograd/ops.h"
#include "nn/positional.h"

#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"

namespace sf::nn {

std::shared_ptr<Module> make_positions(const ModelConfig& cfg, Generator& init_gen, Dtype dtype) {
  switch (cfg.positional) {
    case PositionalKind::Sinusoidal: return std::make_shared<SinusoidalPositional>(cfg.max_len, cfg.d_model, dtype);
    case PositionalKind::Learned: return std::make_shared<LearnedPositional>(cfg.max_len, cfg.d_model, init_gen, dtype);
    default: return nullptr;  // RoPE, ALiBi: inside self-attention; None: nowhere
  }
}

Tensor add_positions(const Module& positions, const Tensor& x, std::int64_t start_pos) {
  if (const auto* sin = dynamic_cast<const SinusoidalPositional*>(&positions)) return sin->forward(x, start_pos);
  const auto* learned = dynamic_cast<const LearnedPositional*>(&positions);
  SF_CHECK(learned != nullptr, "add_positions: unexpected positional module ", positions.type_name());
  return learned->forward(x, start_pos);
}

void check_batch_indices(const Tensor& batch_indices, const char* who) {
  if (!batch_indices.defined() || batch_indices.dim() != 1 || batch_indices.dtype() != Dtype::Int64)
    throw std::invalid_argument(std::string(who) + ": expected int64 batch indices of shape (B'), got " +
                                (batch_indices.defined() ? std::string(dtype_name(batch_indices.dtype())) + " " +
                                                               shape_str(batch_indices.shape())
                                                         : std::string("an undefined tensor")));
}

// Whether rows of x (B, ...) may be moved in place to the order `from`: x is contiguous, held by
// nothing else (no other tensor or view sees its memory), not part of a graph, and `from` holds
// B rows, each in [0, B).
static bool can_reorder_in_place(const Tensor& x, const std::vector<std::int64_t>& from) {
  const std::int64_t B = x.size(0);
  if (!x.is_contiguous() || x.requires_grad() || x.grad_fn() || static_cast<std::int64_t>(from.size()) != B ||
      x.impl_ptr().use_count() != 1 || x.impl()->storage.use_count() != 1)
    return false;
  return std::all_of(from.begin(), from.end(), [B](std::int64_t f) { return f >= 0 && f < B; });
}

// x (B, ...): row r becomes row from[r], in place (can_reorder_in_place said yes). Only the rows
// that change are written, from copies of the rows they take (a row may be taken by one row and
// overwritten by another in the same call).
static void reorder_rows_in_place(Tensor& x, const std::vector<std::int64_t>& from) {
  const std::int64_t B = x.size(0);
  std::vector<std::int64_t> taken;  // the source rows of the rows that change, sorted, once each
  for (std::int64_t r = 0; r < B; ++r)
    if (from[r] != r) taken.push_back(from[r]);
  if (taken.empty()) return;  // every row stays
  std::sort(taken.begin(), taken.end());
  taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
  const std::size_t row_bytes = static_cast<std::size_t>(x.numel() / B) * dtype_size(x.dtype());
  auto* rows = static_cast<unsigned char*>(x.raw_data());
  std::vector<unsigned char> copies(taken.size() * row_bytes);  // row taken[i] at i * row_bytes
  for (std::size_t i = 0; i < taken.size(); ++i)
    std::memcpy(&copies[i * row_bytes], rows + taken[i] * row_bytes, row_bytes);
  for (std::int64_t r = 0; r < B; ++r) {
    if (from[r] == r) continue;
    const auto i = static_cast<std::size_t>(std::lower_bound(taken.begin(), taken.end(), from[r]) - taken.begin());
    std::memcpy(rows + r * row_bytes, &copies[i * row_bytes], row_bytes);
  }
}

// Beam search reorders the self-attention cache after every step. The cache is a tensor of its
// own (each append makes a new one), so its rows move in place: a new (B',Hkv,T,Dh) tensor for
// every layer and step cost a full copy into fresh pages. Where they may not (a shared or graph
// tensor, B' != B, an index out of range) index_select copies them, or names the bad index.
void reorder_kv(KVCache& cache, const Tensor& batch_indices) {
  if (!cache.k.defined()) return;
  const auto from = batch_indices.contiguous().to_vector<std::int64_t>();
  if (can_reorder_in_place(cache.k, from) && can_reorder_in_place(cache.v, from)) {
    reorder_rows_in_place(cache.k, from);
    reorder_rows_in_place(cache.v, from);
    return;
  }
  cache.k = index_select(cache.k, 0, batch_indices);
  cache.v = index_select(cache.v, 0, batch_indices);
}

static void summarize(const Module& m, const std::string& name, int depth, std::ostringstream& out) {
  out << std::string(2 * depth, ' ') << name << " (" << m.type_name() << "): " << m.parameter_count() << " parameters\n";
  for (const auto& [child_name, child] : m.children()) summarize(*child, child_name, depth + 1, out);
}

std::string module_tree_summary(const Module& model, const std::string& root_name) {
  std::ostringstream out;
  summarize(model, root_name, 0, out);
  return out.str();
}

std::unique_ptr<Model> make_model(const ModelConfig& cfg, Generator& init_gen, Dtype dtype) {
  switch (cfg.arch) {
    case Arch::EncoderDecoder: return std::make_unique<Seq2SeqTransformer>(cfg, init_gen, dtype);
    case Arch::DecoderOnly: return std::make_unique<DecoderOnlyTransformer>(cfg, init_gen, dtype);
    case Arch::EncoderOnly: return std::make_unique<EncoderOnlyTransformer>(cfg, init_gen, dtype);
    case Arch::Rnn: return std::make_unique<RnnSeq2Seq>(cfg, init_gen, dtype);
  }
  SF_CHECK(false, "make_model: unknown architecture ", static_cast<int>(cfg.arch));
}

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::EncoderDecoder: return "encoder-decoder";
    case Arch::DecoderOnly: return "decoder-only";
    case Arch::EncoderOnly: return "encoder-only";
    case Arch::Rnn: return "rnn";
  }
  return "?";
}

Arch parse_arch(const std::string& name) {
  if (name == "encoder-decoder") return Arch::EncoderDecoder;
  if (name == "decoder-only") return Arch::DecoderOnly;
  if (name == "encoder-only") return Arch::EncoderOnly;
  if (name == "rnn") return Arch::Rnn;
  throw std::invalid_argument("expected encoder-decoder, decoder-only, encoder-only or rnn, got '" + name + "'");
}

void ModelConfig::validate_rnn() const {
  const auto positive = [](const char* field, std::int64_t value) {
    if (value <= 0)
      throw std::invalid_argument(std::string("ModelConfig: ") + field + " must be positive, got " + std::to_string(value));
  };
  positive("src_vocab", src_vocab);
  positive("tgt_vocab", tgt_vocab);
  positive("d_model", d_model);
  if (d_model % 2 != 0)
    throw std::invalid_argument("ModelConfig: arch rnn needs an even d_model (D/2 units per encoder direction), got " +
                                std::to_string(d_model));
  positive("encoder_layers", encoder_layers);
  positive("decoder_layers", decoder_layers);
  positive("max_len", max_len);
  if (pad_id < 0 || pad_id >= src_vocab || pad_id >= tgt_vocab)
    throw std::invalid_argument("ModelConfig: pad_id " + std::to_string(pad_id) +
                                " is not a token of both vocabularies (src_vocab " + std::to_string(src_vocab) +
                                ", tgt_vocab " + std::to_string(tgt_vocab) + ")");
  if (!(dropout >= 0 && dropout < 1))  // written so that NaN fails too
    throw std::invalid_argument("ModelConfig: dropout must be in [0, 1), got " + std::to_string(dropout));
}

bool is_transformer(Arch arch) { return arch != Arch::Rnn; }

void require_transformer(Arch arch, const std::string& who) {
  if (!is_transformer(arch))
    throw std::invalid_argument(who + ": needs a Transformer (arch encoder-decoder, decoder-only or encoder-only), got arch " +
                                arch_name(arch));
}

}  // namespace sf::nn
