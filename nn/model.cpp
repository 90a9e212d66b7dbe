#include "nn/model.h"

#include <sstream>
#include <stdexcept>

#include "autograd/ops.h"
#include "nn/positional.h"

#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
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
  if (const auto* learned = dynamic_cast<const LearnedPositional*>(&positions)) return learned->forward(x, start_pos);
  throw std::invalid_argument(std::string("add_positions: unexpected positional module ") + positions.type_name());
}

void reorder_kv(KVCache& cache, const Tensor& batch_indices) {
  if (!cache.k.defined()) return;
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
  }
  throw std::invalid_argument("make_model: unknown architecture");
}

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::EncoderDecoder: return "encoder-decoder";
    case Arch::DecoderOnly: return "decoder-only";
    case Arch::EncoderOnly: return "encoder-only";
  }
  return "?";
}

Arch parse_arch(const std::string& name) {
  if (name == "encoder-decoder") return Arch::EncoderDecoder;
  if (name == "decoder-only") return Arch::DecoderOnly;
  if (name == "encoder-only") return Arch::EncoderOnly;
  throw std::invalid_argument("expected encoder-decoder, decoder-only or encoder-only, got '" + name + "'");
}

}  // namespace sf::nn
