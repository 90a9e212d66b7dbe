// Demo `gqa`: see demo_gqa.h for what is computed and how.
//
// Letters: B rows, T decoded tokens, D d_model, H query heads, Hkv key/value heads, Dh head width,
// V vocabulary.
#include "train/lessons/demo_gqa.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/runtime/threads.h"
#include "autograd/tensor.h"
#include "nn/decoder_only.h"
#include "nn/model.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {
namespace {

constexpr std::int64_t kVocab = 64;       // V: a small vocabulary (the embedding is not what is compared)
constexpr std::int64_t kFloat32Bytes = 4;  // the models run in float32

nn::ModelConfig gqa_config(const GqaDemoSettings& s, std::int64_t kv_heads) {
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::DecoderOnly;
  cfg.src_vocab = cfg.tgt_vocab = kVocab;
  cfg.d_model = s.d_model;
  cfg.n_heads = s.n_heads;
  cfg.n_kv_heads = kv_heads;
  cfg.d_ff = 2 * s.d_model;
  cfg.decoder_layers = s.layers;
  cfg.encoder_layers = 0;
  cfg.dropout = 0;
  cfg.positional = nn::PositionalKind::RoPE;
  cfg.max_len = s.tokens + 1;
  cfg.pad_id = 0;
  return cfg;
}

// The argmax of every row of logits (B,V) -> (B,1) int64: greedy decoding's next tokens.
Tensor greedy_next(const Tensor& logits) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  const std::vector<float> v = logits.contiguous().to_vector<float>();
  std::vector<std::int64_t> next(static_cast<std::size_t>(rows));
  for (std::int64_t b = 0; b < rows; ++b) {
    const auto row = v.begin() + b * vocab;
    next[b] = std::max_element(row, row + vocab) - row;
  }
  return from_vector(next, {rows, 1});
}

// Decodes s.tokens tokens for s.batch rows from a one-token prompt; returns the state (the cache).
std::unique_ptr<nn::DecodeState> decode_tokens(const nn::Model& model, const GqaDemoSettings& s) {
  std::vector<std::int64_t> prompt(static_cast<std::size_t>(s.batch));
  for (std::int64_t b = 0; b < s.batch; ++b) prompt[b] = 1 + b % (kVocab - 1);
  auto state = model.start_decoding(from_vector(prompt, {s.batch, 1}));  // P = 1: nothing prefilled
  Tensor tokens = state->first_tokens();                                  // (B,1)
  for (std::int64_t t = 0; t < s.tokens; ++t) tokens = greedy_next(model.decode_step(tokens, *state));
  return state;
}

// Sets the OpenMP thread count for its lifetime, then restores the caller's.
struct ScopedThreads {
  explicit ScopedThreads(int n) : before(num_threads()) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(before); }
  int before;
};

// Decodes max(1, repeats) times; returns the last state and sets tokens_per_second to B * T / the
// median wall time (0 when repeats == 0).
std::unique_ptr<nn::DecodeState> timed_decoding(const nn::Model& model, const GqaDemoSettings& s,
                                                double& tokens_per_second) {
  std::vector<double> seconds;
  std::unique_ptr<nn::DecodeState> state;
  for (int r = 0; r < std::max(1, s.repeats); ++r) {
    const auto start = std::chrono::steady_clock::now();
    state = decode_tokens(model, s);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  tokens_per_second = s.repeats > 0 ? static_cast<double>(s.batch * s.tokens) / seconds[seconds.size() / 2] : 0.0;
  return state;
}

GqaVariant measure_variant(const GqaDemoSettings& s, std::int64_t kv_heads, std::uint64_t seed) {
  const nn::ModelConfig cfg = gqa_config(s, kv_heads);
  Generator init(seed);
  const auto model = nn::make_model(cfg, init);
  model->eval();
  const auto& decoder = dynamic_cast<const nn::DecoderOnlyTransformer&>(*model);
  const nn::MultiHeadAttention& attn = *(*decoder.layers)[0].self_attn;

  GqaVariant v;
  v.kv_heads = kv_heads;
  v.name = kv_heads == s.n_heads ? "MHA" : (kv_heads == 1 ? "MQA" : "GQA");
  const std::int64_t d = s.d_model, dh = cfg.head_dim(), h = s.n_heads;
  v.attn_params = attn.parameter_count();
  v.kv_proj_params = attn.k_proj->parameter_count() + attn.v_proj->parameter_count();
  v.kv_proj_params_formula = 2 * (d * kv_heads * dh + kv_heads * dh);
  v.attn_params_formula = (d * h * dh + h * dh) + (h * dh * d + d) + v.kv_proj_params_formula;
  v.bytes_per_token_formula = 2 * s.layers * kv_heads * dh * kFloat32Bytes;

  // One thread: a decode step multiplies matrices of B rows, too small to share between threads
  // (on a busy machine, threads waiting for each other take longer than the work).
  const ScopedThreads one_thread(1);
  NoGradGuard no_grad;  // decoding keeps no graph
  const auto state = timed_decoding(*model, s, v.tokens_per_second);
  v.cached_positions = state->length();
  v.cache_bytes = state->cache_bytes();
  return v;
}

}  // namespace

GqaDemoResult compute_gqa_demo(std::uint64_t seed, const GqaDemoSettings& settings) {
  if (settings.kv_heads.empty() || settings.d_model % settings.n_heads != 0)
    throw std::invalid_argument("demo gqa: expected kv_heads to be listed and d_model " +
                                std::to_string(settings.d_model) + " divisible by n_heads " +
                                std::to_string(settings.n_heads));
  GqaDemoResult r;
  r.settings = settings;
  r.head_dim = settings.d_model / settings.n_heads;
  for (const std::int64_t kv : settings.kv_heads) r.variants.push_back(measure_variant(settings, kv, seed));

  // The claim: the formulas are what the modules hold, and everything k/v scales with Hkv.
  const GqaVariant& first = r.variants.front();
  r.claim_holds = true;
  for (const GqaVariant& v : r.variants) {
    const bool formulas = v.attn_params == v.attn_params_formula && v.kv_proj_params == v.kv_proj_params_formula &&
                          v.cache_bytes == v.bytes_per_token_formula * settings.batch * v.cached_positions;
    // bytes and k/v parameters against the first variant: exactly in the ratio Hkv : Hkv_first
    const bool ratios = v.bytes_per_token_formula * first.kv_heads == first.bytes_per_token_formula * v.kv_heads &&
                        v.kv_proj_params * first.kv_heads == first.kv_proj_params * v.kv_heads &&
                        v.cached_positions == settings.tokens;
    r.claim_holds = r.claim_holds && formulas && ratios;
  }
  return r;
}

namespace {

void print_gqa(const GqaDemoResult& r, std::ostream& out) {
  const GqaDemoSettings& s = r.settings;
  out << "MHA vs GQA vs MQA at the same width / 多头、分组查询、多查询注意力的对比\n"
      << "  decoder-only model: D " << s.d_model << ", H " << s.n_heads << " query heads, Dh " << r.head_dim << ", "
      << s.layers << " layers, RoPE, float32, random init; decoded " << s.tokens << " tokens x " << s.batch
      << " rows with the KV cache (greedy)\n\n"
      << "  variant  Hkv   attn params (module = formula)   k+v proj params   KV bytes/token (formula)"
         "   cache bytes (allocated = formula x B x T)   tokens/s\n";
  for (const GqaVariant& v : r.variants) {
    const std::int64_t expected = v.bytes_per_token_formula * s.batch * v.cached_positions;
    out << "  " << std::left << std::setw(7) << v.name << std::right << std::setw(5) << v.kv_heads << std::setw(13)
        << v.attn_params << (v.attn_params == v.attn_params_formula ? " = " : " != ") << std::left << std::setw(17)
        << v.attn_params_formula << std::right << std::setw(18) << v.kv_proj_params << std::setw(27)
        << v.bytes_per_token_formula << std::setw(16) << v.cache_bytes << (v.cache_bytes == expected ? " = " : " != ")
        << std::left << std::setw(26) << expected << std::right << std::fixed << std::setprecision(0) << std::setw(8)
        << v.tokens_per_second << "\n";
  }
  const GqaVariant& last = r.variants.back();
  std::string ratio, names;
  for (const GqaVariant& v : r.variants) {
    if (!ratio.empty()) ratio += ':', names += ':';
    ratio += std::to_string(v.bytes_per_token_formula / last.bytes_per_token_formula);
    names += v.name;
  }
  out << "\n  KV bytes per token, " << names << " = " << ratio << "\n"
      << "  tokens/s: B x T / median of " << s.repeats << " decodings on 1 thread, measured on this machine: "
      << "not a claim. While decoding, the G query heads of a group\n"
      << "  read their one k/v head in place (grouped_query_attention), so a step reads the Hkv-head cache once: "
      << "GQA/MQA save the memory\n  a long context or a large batch must hold, and the bytes every step must read "
      << "(demo kv-bandwidth).\n"
      << (r.claim_holds ? "claim holds / 结论成立\n" : "claim does NOT hold / 结论不成立\n");
}

// One bar panel: value of each variant, labelled.
void draw_bars(train::SvgWriter& svg, double left, const GqaDemoResult& r, const std::string& title,
               const std::string& y_label, double (*value)(const GqaVariant&)) {
  double top_value = 0;
  for (const GqaVariant& v : r.variants) top_value = std::max(top_value, value(v));
  const train::Axis slots{0, static_cast<double>(r.variants.size()), 1, {}};  // one slot per bar, no ticks
  const train::Frame f{left, 70, 220, 260, slots, train::make_axis(0, top_value > 0 ? top_value : 1, 4)};
  train::draw_frame(svg, f, "", y_label, title, true);
  const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"};
  for (std::size_t i = 0; i < r.variants.size(); ++i) {
    const GqaVariant& v = r.variants[i];
    const double x0 = f.px(static_cast<double>(i) + 0.15), x1 = f.px(static_cast<double>(i) + 0.85);
    const std::string label = std::to_string(std::llround(value(v)));
    svg.rect(x0, f.py(value(v)), x1 - x0, f.py(0) - f.py(value(v)), {.fill = colours[i % 4], .css_class = "bar"},
             std::string(v.name) + ": " + label);
    svg.text((x0 + x1) / 2, f.py(value(v)) - 4, label, {.size = train::kTickFont, .anchor = "middle"});
    svg.text((x0 + x1) / 2, f.y + f.h + 16, v.name, {.size = train::kTickFont, .anchor = "middle"});
    svg.text((x0 + x1) / 2, f.y + f.h + 30, "Hkv " + std::to_string(v.kv_heads),
             {.size = train::kTickFont, .anchor = "middle"});
  }
}

double kv_params_of(const GqaVariant& v) { return static_cast<double>(v.kv_proj_params); }
double bytes_of(const GqaVariant& v) { return static_cast<double>(v.bytes_per_token_formula); }
double speed_of(const GqaVariant& v) { return v.tokens_per_second; }

void write_gqa_svg(const GqaDemoResult& r, const std::string& path) {
  train::SvgWriter svg(960, 400);
  svg.text(20, 26, "MHA vs GQA vs MQA: D " + std::to_string(r.settings.d_model) + ", " +
                       std::to_string(r.settings.n_heads) + " query heads / 多头、分组查询、多查询注意力",
           {.size = train::kTitleFont, .bold = true});
  draw_bars(svg, 80, r, "k_proj + v_proj parameters", "parameters (one layer)", kv_params_of);
  draw_bars(svg, 400, r, "KV-cache bytes per token", "bytes (all layers)", bytes_of);
  draw_bars(svg, 720, r, "decode speed (this machine)", "tokens / s", speed_of);
  train::write_file_atomically(path, svg.finish());
}

}  // namespace

int run_gqa_demo(const DemoOptions& options, std::ostream& out) {
  const GqaDemoResult r = compute_gqa_demo(options.seed);
  print_gqa(r, out);
  const std::string path = demo_svg_path(options, "gqa");
  write_gqa_svg(r, path);
  out << "SVG written to / 图已写入: " << path << "\n";
  return r.claim_holds ? 0 : 1;
}

Json gqa_report(const DemoOptions& options) {
  const GqaDemoResult r = compute_gqa_demo(options.seed);
  std::vector<std::string> names;
  std::vector<double> params, bytes, speed;
  std::vector<std::vector<Json>> rows;
  for (const GqaVariant& v : r.variants) {
    names.push_back(std::string(v.name) + " (Hkv " + std::to_string(v.kv_heads) + ")");
    params.push_back(static_cast<double>(v.attn_params));
    bytes.push_back(static_cast<double>(v.bytes_per_token_formula));
    speed.push_back(v.tokens_per_second);
    rows.push_back({v.name, v.kv_heads, v.attn_params, v.attn_params_formula, v.bytes_per_token_formula, v.cache_bytes,
                    v.tokens_per_second});
  }
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("d_model", "d_model"), r.settings.d_model), number(bilingual("query heads H", "查询头数 H"), r.settings.n_heads),
                       number(bilingual("head width Dh", "每个头的宽度 Dh"), r.head_dim), number(bilingual("layers", "层数"), r.settings.layers)}},
          {"figures", {bars_figure(bilingual("one self-attention layer's parameters", "一个自注意力层的参数量"), names,
                                   {bar_series(bilingual("parameters", "参数量"), params)}, false),
                       bars_figure(bilingual("KV-cache bytes per token (float32)", "每个词元的 KV 缓存字节数（float32）"), names,
                                   {bar_series(bilingual("bytes", "字节"), bytes)}, false),
                       bars_figure(bilingual("decoding speed (tokens/s, this machine)", "解码速度（词元/秒，本机）"), names,
                                   {bar_series(bilingual("tokens/s", "词元/秒"), speed)}, false),
                       table_figure(bilingual("formula against module and allocation", "公式与模块、实际分配的对比"),
                                    {bilingual("variant", "变体"), bilingual("Hkv", "Hkv"), bilingual("parameters (module)", "参数量（模块）"),
                                     bilingual("parameters (formula)", "参数量（公式）"), bilingual("bytes/token (formula)", "字节/词元（公式）"),
                                     bilingual("cache bytes (allocated)", "缓存字节（实际分配）"), bilingual("tokens/s", "词元/秒")},
                                    rows)}}};
}

}  // namespace sf::lessons
