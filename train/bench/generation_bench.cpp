// `scratchformer bench --generation`: see generation_bench.h for what is measured and the formulas.
//
// Letters: B batch, P prompt length, n = P - 1, T keys a step reads, G decode steps, L layers,
// D d_model, H heads, Hkv key/value heads, Dh head width, V vocabulary, N non-embedding parameters.
#include "train/bench/generation_bench.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/runtime/blas_core.h"
#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/runtime/threads.h"
#include "train/bench/bench_util.h"
#include "train/eval/generate.h"
#include "train/setup.h"

namespace sf::train {

using namespace bench_util;  // Clock, median, median_seconds, fixed, rounded, ... (bench_util.h)

namespace {

constexpr std::int64_t kFloatSize = 4;  // bytes of a float32 weight or cached number
constexpr double kFloatBytes = kFloatSize;
constexpr double kKiB = 1024.0;

// The config's [model] as a decoder-only model of vocabulary V; *overridden says whether
// model.arch had to be changed.
nn::ModelConfig decoder_only_config(const Config& cfg, bool* overridden) {
  ModelSection m = cfg.model;
  *overridden = m.arch != "decoder-only";
  m.arch = "decoder-only";
  const std::int64_t V = cfg.data.tokenizer_vocab_size;
  return model_config_from(m, V, V);
}

// Random ids in [4, V), (B,T) int64: random_batch's source (no special ids, no padding).
Tensor random_ids(std::int64_t vocab, std::int64_t batch, std::int64_t length, Generator& gen) {
  return random_batch(vocab, batch, length, 1, gen).src;
}

// Throws on an option out of range (beyond check_options_and_set_threads).
void check_generation_options(const BenchOptions& opt) {
  if (opt.prompt_lengths.empty()) throw std::invalid_argument("bench --generation: no prompt length to measure");
  for (std::int64_t p : opt.prompt_lengths)
    if (p < 1) throw std::invalid_argument("bench --generation: prompt lengths must be >= 1, got " + std::to_string(p));
  if (opt.generation_batches.empty()) throw std::invalid_argument("bench --generation: no batch size to measure");
  for (std::int64_t b : opt.generation_batches)
    if (b < 1 || std::count(opt.generation_batches.begin(), opt.generation_batches.end(), b) > 1)
      throw std::invalid_argument("bench --generation: batch sizes must be >= 1 and distinct, got " + std::to_string(b));
  if (opt.generation_tokens < 1)
    throw std::invalid_argument("bench --generation: decode steps must be >= 1, got " +
                                std::to_string(opt.generation_tokens));
}

// Prefill, then G decode steps, at batch B and prompt length P: times, FLOPs, bytes, the cache.
GenerationRow measure_row(const nn::Model& model, const GenerationParams& params, std::int64_t batch,
                          std::int64_t prompt_len, const BenchOptions& opt, Generator& gen) {
  const nn::ModelConfig& m = model.config();
  const std::int64_t G = opt.generation_tokens;
  GenerationRow row;
  row.batch = batch;
  row.prompt = prompt_len;

  // prefill: a fresh state per call; the last one goes on to the decode steps
  const Tensor prompt = random_ids(m.tgt_vocab, batch, prompt_len, gen);  // (B,P)
  std::unique_ptr<nn::DecodeState> state;
  row.prefill_s = median_seconds([&] { state = model.start_decoding(prompt); }, static_cast<int>(opt.warmup),
                                 static_cast<int>(opt.steps));
  row.prefill_flops = prefill_flops(m, params, batch, prompt_len);
  row.prefill_bytes = kFloatBytes * static_cast<double>(params.non_embedding) +
                      static_cast<double>(kv_cache_bytes(m, batch, prompt_len - 1));

  // decode: step i reads the prompt's last token (i = 0) or a random one, T = P + i keys
  std::vector<Tensor> tokens{state->first_tokens()};  // (B,1) each
  for (std::int64_t i = 1; i < G; ++i) tokens.push_back(random_ids(m.tgt_vocab, batch, 1, gen));
  std::vector<double> times;
  for (std::int64_t i = 0; i < G; ++i) {
    const auto start = Clock::now();
    model.decode_step(tokens[static_cast<std::size_t>(i)], *state);  // (B,V), not used
    times.push_back(seconds_since(start));
    const std::int64_t keys = prompt_len + i;
    row.decode_flops += decode_step_flops(m, params, batch, keys) / static_cast<double>(G);
    row.decode_bytes += (kFloatBytes * static_cast<double>(params.per_token()) +
                         static_cast<double>(kv_cache_bytes(m, batch, keys))) / static_cast<double>(G);
  }
  row.decode_s = median(times);
  row.kv_bytes_formula = kv_cache_bytes(m, batch, prompt_len - 1 + G);
  row.kv_bytes_allocated = state->cache_bytes();
  return row;
}

// ---- output --------------------------------------------------------------------------------

nlohmann::ordered_json row_json(const GenerationRow& r) {
  nlohmann::ordered_json e;
  e["B"] = r.batch;
  e["P"] = r.prompt;
  e["prefill_ms"] = rounded(r.prefill_s * 1e3, 3);
  e["prefill_tokens_per_s"] = rounded(r.prefill_tokens_per_s(), 1);
  e["prefill_flops"] = r.prefill_flops;
  e["prefill_gflops"] = rounded(r.prefill_gflops(), 3);
  e["prefill_flop_per_byte"] = rounded(r.prefill_flops / r.prefill_bytes, 3);
  e["decode_ms"] = rounded(r.decode_s * 1e3, 3);
  e["decode_tokens_per_s"] = rounded(r.decode_tokens_per_s(), 1);
  e["decode_flops"] = r.decode_flops;
  e["decode_gflops"] = rounded(r.decode_gflops(), 3);
  e["decode_bytes"] = r.decode_bytes;
  e["decode_gbytes_per_s"] = rounded(r.decode_gbytes_per_s(), 3);
  e["decode_flop_per_byte"] = rounded(r.decode_flops / r.decode_bytes, 3);
  e["kv_bytes_formula"] = r.kv_bytes_formula;
  e["kv_bytes_allocated"] = r.kv_bytes_allocated;
  e["prefill_over_decode_gflops"] = rounded(r.prefill_gflops() / r.decode_gflops(), 2);
  return e;
}

nlohmann::ordered_json generation_json(const Config& cfg, const BenchOptions& opt, const GenerationReport& rep,
                                       double load_start, double load_end) {
  nlohmann::ordered_json j;
  j["tool"] = "scratchformer";
  j["mode"] = "generation";
  j["config"] = cfg.source_path;
  j["cpu"] = cpu_model();
  j["blas_core"] = blas_core_name();
  j["threads"] = num_threads();
  j["load_avg_start"] = rounded(load_start, 2);
  j["load_avg_end"] = rounded(load_end, 2);
  j["arch_overridden"] = rep.arch_overridden;
  j["vocab"] = rep.model.tgt_vocab;
  j["params"] = rep.params.total;
  j["params_non_embedding"] = rep.params.non_embedding;
  j["warmup"] = opt.warmup;
  j["steps"] = opt.steps;
  j["decode_steps"] = opt.generation_tokens;
  j["skipped_prompt_lengths"] = rep.skipped;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const GenerationRow& r : rep.rows) list.push_back(row_json(r));
  j["rows"] = list;
  return j;
}

// "16, 32" from {16, 32}
std::string joined(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// The lines above the tables: the machine, the model, what was skipped, the formulas.
void print_generation_setup(std::ostream& os, const Config& cfg, const BenchOptions& opt, const GenerationReport& rep,
                            double load_start, double load_end) {
  const nn::ModelConfig& m = rep.model;
  const std::int64_t G = opt.generation_tokens;
  print_machine(os, " --generation", cfg, load_start, load_end);
  if (rep.arch_overridden)
    os << "note      model.arch is " << cfg.model.arch << ": built as decoder-only from the same [model] ("
       << m.decoder_layers << " decoder_layers, no encoder)\n";
  os << "model     decoder-only, L " << m.decoder_layers << ", D " << m.d_model << ", H " << m.n_heads << ", Hkv "
     << m.kv_heads() << ", Dh " << m.head_dim() << ", F " << m.d_ff << ", V " << m.tgt_vocab << ", "
     << cfg.model.positional << ", " << cfg.model.attention << " attention, max_len " << m.max_len
     << "; random weights, eval, no grad\n"
     << "params    " << rep.params.total << " (N = " << rep.params.non_embedding << " non-embedding, V D = "
     << rep.params.head << " embedding = LM head, tied)\n";
  if (!rep.skipped.empty())
    os << "skipped   P " << joined(rep.skipped) << ": above model.max_len " << m.max_len << " - " << G
       << " decode steps (--set model.max_len="
       << *std::max_element(rep.skipped.begin(), rep.skipped.end()) + G << " to include them)\n";
  os << "prefill   start_decoding on a random (B,P) prompt, median of " << opt.steps << " after " << opt.warmup
     << ": n = P - 1 tokens through the layers, no LM head\n"
     << "          FLOPs = B (2 N n + 4 L n^2 D)   bytes = 4 N + 2 L B Hkv n Dh 4 (weights once, KV written)\n"
     << "decode    then " << G << " decode_step calls, median; step i reads T = P + i keys; per step (B tokens), "
     << "mean over the steps:\n"
     << "          FLOPs = B (2 (N + V D) + 4 L T D)   bytes = 4 (N + V D) + 2 L B Hkv T Dh 4 (weights once, KV "
        "read)\n"
     << "KV        2 L B Hkv T Dh 4 bytes at T = P - 1 + " << G
     << " (formula) and state->cache_bytes() (allocated), after the last step\n";
}

// " ---- label ----" over `width` columns (a group of the table's columns)
std::string column_group(const std::string& label, std::size_t width) {
  const std::size_t dashes = width > label.size() + 3 ? width - label.size() - 3 : 0;
  return " " + std::string(dashes / 2, '-') + " " + label + " " + std::string(dashes - dashes / 2, '-');
}

// One batch size's table: a row per P.
void print_generation_table(std::ostream& os, const std::vector<GenerationRow>& rows, std::int64_t batch) {
  os << "\nbatch " << batch << "\n"
     << std::setw(6) << "" << column_group("prefill", 46) << column_group("decode, per step", 59)
     << column_group("KV KiB", 19) << "\n"
     << std::right << std::setw(6) << "P" << std::setw(9) << "ms" << std::setw(10) << "tok/s" << std::setw(10)
     << "MFLOP" << std::setw(9) << "GFLOP/s" << std::setw(8) << "FLOP/B" << std::setw(9) << "ms" << std::setw(9)
     << "tok/s" << std::setw(9) << "MFLOP" << std::setw(9) << "GFLOP/s" << std::setw(8) << "MB" << std::setw(7)
     << "GB/s" << std::setw(8) << "FLOP/B" << std::setw(9) << "formula" << std::setw(10) << "allocated" << "\n";
  for (const GenerationRow& r : rows) {
    if (r.batch != batch) continue;
    os << std::setw(6) << r.prompt << std::setw(9) << fixed(r.prefill_s * 1e3, 2) << std::setw(10)
       << fixed(r.prefill_tokens_per_s(), 0) << std::setw(10) << fixed(r.prefill_flops / 1e6, 2) << std::setw(9)
       << fixed(r.prefill_gflops(), 2) << std::setw(8) << fixed(r.prefill_flops / r.prefill_bytes, 2) << std::setw(9)
       << fixed(r.decode_s * 1e3, 3) << std::setw(9) << fixed(r.decode_tokens_per_s(), 0) << std::setw(9)
       << fixed(r.decode_flops / 1e6, 2) << std::setw(9) << fixed(r.decode_gflops(), 2) << std::setw(8)
       << fixed(r.decode_bytes / 1e6, 2) << std::setw(7) << fixed(r.decode_gbytes_per_s(), 2) << std::setw(8)
       << fixed(r.decode_flops / r.decode_bytes, 2) << std::setw(9)
       << fixed(static_cast<double>(r.kv_bytes_formula) / kKiB, 1) << std::setw(10)
       << fixed(static_cast<double>(r.kv_bytes_allocated) / kKiB, 1) << "\n";
  }
  os << "prefill / decode GFLOP/s at B " << batch << ":";
  bool first = true;
  for (const GenerationRow& r : rows) {
    if (r.batch != batch) continue;
    os << (first ? " " : ", ") << "P " << r.prompt << " " << fixed(r.prefill_gflops() / r.decode_gflops(), 1) << "x";
    first = false;
  }
  os << "\n";
}

}  // namespace

// ---- public pieces -------------------------------------------------------------------------

GenerationParams generation_params(const nn::Model& model) {
  GenerationParams p;
  p.total = model.parameter_count();
  p.non_embedding = p.total;
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (name == "embed.weight") p.head = tensor.numel();  // (V,D), tied to the LM head
    if (name == "embed.weight" || name == "pos.weight") p.non_embedding -= tensor.numel();
  }
  return p;
}

double prefill_flops(const nn::ModelConfig& m, const GenerationParams& p, std::int64_t batch, std::int64_t prompt) {
  const double B = static_cast<double>(batch), n = static_cast<double>(prompt - 1);
  const double L = static_cast<double>(m.decoder_layers), D = static_cast<double>(m.n_heads * m.head_dim());
  return B * (2 * static_cast<double>(p.non_embedding) * n + 4 * L * n * n * D);
}

double decode_step_flops(const nn::ModelConfig& m, const GenerationParams& p, std::int64_t batch, std::int64_t keys) {
  const double B = static_cast<double>(batch), T = static_cast<double>(keys);
  const double L = static_cast<double>(m.decoder_layers), D = static_cast<double>(m.n_heads * m.head_dim());
  return B * (2 * static_cast<double>(p.per_token()) + 4 * L * T * D);
}

std::int64_t kv_cache_bytes(const nn::ModelConfig& m, std::int64_t batch, std::int64_t positions) {
  return 2 * m.decoder_layers * batch * m.kv_heads() * positions * m.head_dim() * kFloatSize;
}

GenerationReport measure_generation(const Config& cfg, const BenchOptions& opt) {
  // the [model] of an rnn config names no heads or feed-forward width of its own to build a decoder-only model from
  nn::require_transformer(nn::parse_arch(cfg.model.arch), "bench --generation");
  check_options_and_set_threads(cfg, opt);
  check_generation_options(opt);
  GenerationReport rep;
  rep.model = decoder_only_config(cfg, &rep.arch_overridden);
  std::vector<std::int64_t> kept;  // P + G <= max_len: the last step's position, P - 2 + G, fits
  for (std::int64_t p : opt.prompt_lengths)
    (p <= rep.model.max_len - opt.generation_tokens ? kept : rep.skipped).push_back(p);
  if (kept.empty())
    throw std::invalid_argument("bench --generation: every prompt length is above model.max_len " +
                                std::to_string(rep.model.max_len) + " - " + std::to_string(opt.generation_tokens) +
                                " decode steps; raise model.max_len (--set model.max_len=...)");

  Generator gen(static_cast<std::uint64_t>(cfg.train.seed));
  const std::unique_ptr<nn::Model> model = nn::make_model(rep.model, gen);
  model->eval();
  const NoGradGuard no_grad;
  PackedWeights packed;  // Linear on weights packed once, as generate does (train/eval/generate.h)
  const PackedWeightsScope use_packed(packed);
  pack_matrix_weights(*model, packed);
  rep.params = generation_params(*model);
  for (std::int64_t batch : opt.generation_batches)
    for (std::int64_t p : kept) rep.rows.push_back(measure_row(*model, rep.params, batch, p, opt, gen));
  return rep;
}

int run_generation_bench(const Config& cfg, const BenchOptions& opt) {
  const double load_start = load_average_1min();
  const GenerationReport rep = measure_generation(cfg, opt);
  const double load_end = load_average_1min();
  const nlohmann::ordered_json j = generation_json(cfg, opt, rep, load_start, load_end);
  if (!opt.json_only) {
    std::ostringstream os;
    print_generation_setup(os, cfg, opt, rep, load_start, load_end);
    for (std::int64_t batch : opt.generation_batches) print_generation_table(os, rep.rows, batch);
    std::cout << os.str() << "\n";
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace sf::train
