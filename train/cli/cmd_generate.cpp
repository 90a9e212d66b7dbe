// `scratchformer generate --checkpoint FILE [--prompt TEXT | --input FILE]`: continues a prompt
// with a decoder-only model (train/eval/generate.h), greedy at --temperature 0, else sampled
// (--top-k, --top-p, --seed), KV-cached. The text goes to stdout, one line per prompt; the two
// phases (prefill, decode: tokens/s, ms per token) and the KV cache (the lecture's formula and
// as allocated) go to stderr.
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/generate.h"
#include "train/setup.h"
#include "train/task.h"

namespace sf::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, input;
  bool has_prompt = false;
  train::GenerateOptions options;
  std::uint64_t seed = 0;
  std::string precision = "float32";  // --precision: float32 | bf16 matrix products
};

// "prefill: 5 tokens in 3.1 ms (1613 tokens/s) | decode: 19 tokens, 2.40 ms per token (417 tokens/s) | KV cache ..."
std::string describe_phases(const train::Generation& g, const nn::ModelConfig& cfg) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << "prefill: " << g.prompt_tokens << " tokens in " << 1e3 * g.prefill_seconds
     << " ms (" << std::setprecision(0) << g.prompt_tokens / g.prefill_seconds << " tokens/s)";
  if (g.decode_steps > 0)
    os << " | decode: " << g.decode_steps << " tokens, " << std::setprecision(2) << 1e3 * g.decode_seconds / g.decode_steps
       << " ms per token (" << std::setprecision(0) << g.decode_steps / g.decode_seconds << " tokens/s)";
  os << " | KV cache at " << g.cache_positions << " positions: " << train::kv_cache_formula_bytes(cfg, g.cache_positions)
     << (cfg.attention_window > 0 ? " bytes by 2*L*Hkv*min(T,W)*Dh*4 (L " : " bytes by 2*L*Hkv*T*Dh*4 (L ")
     << cfg.decoder_layers << ", Hkv " << cfg.kv_heads() << ", Dh " << cfg.d_model / cfg.n_heads;
  if (cfg.attention_window > 0) os << ", a ring of W " << cfg.attention_window;
  os << "), " << g.cache_bytes << " allocated";
  return os.str();
}

int run_generate(GenerateArgs& a) {
  if (a.has_prompt == !a.input.empty()) throw std::invalid_argument("generate: give either --prompt TEXT or --input FILE");
  const auto precision = precision_scope(a.precision);
  train::check_sampling_options(a.options.sampling);
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  train::require_model(im.config, a.checkpoint, "generate", im.config.model.arch == "decoder-only",
                       "a decoder-only model (data.task = \"lm\" or \"translation\")");
  const data::Tokenizer& tok = im.tokenizers->tgt;
  a.options.allowed = train::generatable_tokens(tok);
  const std::vector<std::string> prompts = a.has_prompt ? std::vector<std::string>{a.prompt} : read_input_lines(a.input);
  Generator gen(a.seed);
  PackedWeights packed;  // Linear's weights packed once for all the prompts (train/eval/generate.h)
  const PackedWeightsScope use_packed(packed);
  for (const std::string& text : prompts) {
    std::vector<std::int64_t> prompt{data::kBosId};
    const auto ids = tok.encode(text);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
    const train::Generation g = train::generate(*im.model, prompt, a.options, gen);
    std::vector<std::int64_t> all(prompt.begin() + 1, prompt.end());
    all.insert(all.end(), g.tokens.begin(), g.tokens.end());
    std::cout << tok.decode(all) << std::endl;
    std::cerr << describe_phases(g, im.model->config()) << (g.stopped_at_eos ? "; stopped at </s>" : "") << "\n";
  }
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  train::SamplingOptions& s = a->options.sampling;
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt with a decoder-only model (greedy or sampled, KV-cached)");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint of a decoder-only model")->required();
  cmd->add_option("--prompt", a->prompt, "The text to continue (may be empty: the model starts from <s>)")
      ->each([a](const std::string&) { a->has_prompt = true; });
  cmd->add_option("--input", a->input, "A file of prompts, one per line (one continuation per line)");
  add_precision_option(cmd, a->precision);
  cmd->add_option("--max-new", a->options.max_new, "Tokens generated at most (default: 50)")->check(at_least_one("a token count"));
  cmd->add_option("--temperature", s.temperature, "0 = greedy; else sample from softmax(logits / T) (default: 1)");
  cmd->add_option("--top-k", s.top_k, "Sample among the k most likely tokens only, k >= 1 (default: all)")
      ->check(at_least_one("a number of tokens"));
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling: the smallest set whose probability reaches p, in (0, 1] (default: 1)");
  cmd->add_option("--seed", a->seed, "Seed of the sampling (default: 0)");
  return {cmd, [a] { return run_generate(*a); }};
}

}  // namespace sf::cli
