#include "nn/model.h"

#include <stdexcept>

#include "nn/seq2seq.h"

namespace sf::nn {

std::unique_ptr<Model> make_model(const ModelConfig& cfg, Generator& init_gen, Dtype dtype) {
  switch (cfg.arch) {
    case Arch::EncoderDecoder: return std::make_unique<Seq2SeqTransformer>(cfg, init_gen, dtype);
  }
  throw std::invalid_argument("make_model: unknown architecture");
}

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::EncoderDecoder: return "encoder-decoder";
  }
  return "?";
}

Arch parse_arch(const std::string& name) {
  if (name == "encoder-decoder") return Arch::EncoderDecoder;
  throw std::invalid_argument("expected encoder-decoder, got '" + name + "'");
}

}  // namespace sf::nn
