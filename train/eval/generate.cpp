#include "train/eval/generate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "autograd/node.h"
#include "autograd/runtime/bf16.h"
#include "data/tokenizer.h"

namespace sf::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check_prompt(const nn::Model& model, const std::vector<std::int64_t>& prompt) {
  const nn::ModelConfig& cfg = model.config();
  if (cfg.arch != nn::Arch::DecoderOnly)
    throw std::invalid_argument(std::string("generate needs a decoder-only model, got an ") + nn::arch_name(cfg.arch) + " one");
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt is empty (it starts with <s> at least)");
  if (static_cast<std::int64_t>(prompt.size()) >= cfg.max_len)
    throw std::invalid_argument("generate: the prompt is " + std::to_string(prompt.size()) + " tokens with <s>, but the model has " +
                                std::to_string(cfg.max_len) + " positions (model.max_len), so no token fits after it");
}

}  // namespace

Generation generate(const nn::Model& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& opt,
                    Generator& gen) {
  check_prompt(model, prompt);
  check_sampling_options(opt.sampling);
  NoGradGuard no_grad;
  const nn::ModelConfig& cfg = model.config();
  std::vector<bool> allowed = opt.allowed;
  if (allowed.empty()) {
    allowed.assign(static_cast<std::size_t>(cfg.tgt_vocab), true);
    allowed[data::kPadId] = allowed[data::kBosId] = false;
  }
  Generation g;
  g.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  const std::int64_t max_new = std::min(opt.max_new, cfg.max_len - g.prompt_tokens);

  // Linear on weights packed once (generate.h), packed before the clock starts
  DecodingPackedWeights packed;
  pack_matrix_weights(model, packed.weights());

  // prefill: the prompt's first P - 1 tokens into the cache, then its last token -> first logits
  auto t0 = Clock::now();
  const auto state = model.start_decoding(from_vector<std::int64_t>(prompt, {1, g.prompt_tokens}));
  Tensor logits = model.decode_step(state->first_tokens(), *state);  // (1,V)
  g.prefill_seconds = seconds_since(t0);

  // decode: one token per step
  t0 = Clock::now();
  for (std::int64_t n = 0; n < max_new; ++n) {
    const std::int64_t next = sample_token(logits.to_vector<float>(), allowed, opt.sampling, gen);
    if (next == data::kEosId) {
      g.stopped_at_eos = true;
      break;
    }
    g.tokens.push_back(next);
    if (n + 1 == max_new) break;  // the last token needs no logits after it
    logits = model.decode_step(from_vector<std::int64_t>({next}, {1, 1}), *state);
    ++g.decode_steps;
  }
  g.decode_seconds = seconds_since(t0);
  g.cache_positions = state->length();
  g.cache_bytes = state->cache_bytes();
  return g;
}

std::size_t pack_matrix_weights(const nn::Model& model, PackedWeights& packed) {
  const bool bf16 = matmul_precision() == MatmulPrecision::Bf16;
  for (const Tensor& p : model.parameters())
    if (p.dim() == 2 && p.dtype() == Dtype::Float32 && p.is_contiguous())  // W (out, in), as ops_linear.cpp keys it
      packed.get(p.data<float>(), p.size(0), p.size(1), bf16);
  return packed.size();
}

std::int64_t kv_cache_formula_bytes(const nn::ModelConfig& cfg, std::int64_t positions, std::int64_t batch,
                                    std::int64_t element_bytes) {
  const std::int64_t kv_heads = cfg.n_kv_heads == 0 ? cfg.n_heads : cfg.n_kv_heads;
  const std::int64_t head_dim = cfg.d_model / cfg.n_heads;
  const std::int64_t held = cfg.attention_window > 0 ? std::min(positions, cfg.attention_window) : positions;
  return 2 * cfg.decoder_layers * batch * kv_heads * held * head_dim * element_bytes;
}

std::vector<bool> generatable_tokens(const data::Tokenizer& tok) {
  std::vector<bool> allowed(static_cast<std::size_t>(tok.vocab_size()), false);
  for (std::int64_t v = tok.first_ordinary_id(); v < tok.vocab_size(); ++v) allowed[v] = true;
  allowed[data::kEosId] = true;
  return allowed;
}

}  // namespace sf::train
