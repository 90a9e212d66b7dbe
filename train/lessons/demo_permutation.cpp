// `scratchformer demo permutation`: f(P x) against P f(x) for the real modules: one
// nn::MultiHeadAttention (positions none, sinusoidal added to x, RoPE inside), and the whole
// encoder-only model made from a config with model.positional none / sinusoidal / rope.
//
// Letters: B batch, S sequence length, D d_model.
#include "train/lessons/demo_permutation.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <stdexcept>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/encoder_only.h"
#include "nn/positional.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kSeqLen = 6, kDModel = 16, kHeads = 2, kLayers = 2, kVocab = 20;
// Without positions f(P x) and P f(x) are the same sums in another order: float64 rounding,
// ~1e-16 per op on O(1) values; 1e-12 leaves room for the few hundred ops of two layers.
constexpr double kEquivariantF64 = 1e-12;
// The same in float32 (2^-24 ~ 6e-8 per op): ~1e-7 seen; 1e-5 as tests/test_util.h's kFloat32Tol.
constexpr double kEquivariantF32 = 1e-5;
// With positions the outputs are O(1) and a moved token changes them by O(0.1..1): 1e-2 is far
// above any rounding and well below what positions do.
constexpr double kBrokenAtLeast = 1e-2;

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// x: (1,S,D) -> (1,S,D): self-attention, with the sinusoidal table added to x first when asked.
Tensor attend(const nn::MultiHeadAttention& mha, const nn::SinusoidalPositional& table, bool add_table, const Tensor& x) {
  const Tensor h = add_table ? table.forward(x) : x;
  return mha.forward(h, h, Tensor());
}

// One MultiHeadAttention (D 16, 2 heads) on x (1,S,D): positions "none", "sinusoidal" (added to
// x before attention) or "rope" (inside it).
PermutationCase attention_case(const std::string& positions, Dtype dtype, const std::vector<std::int64_t>& p,
                               std::uint64_t seed) {
  Generator gen(seed);
  const Tensor x = randn({1, kSeqLen, kDModel}, gen, dtype);  // (1,S,D)
  const auto inside = positions == "rope" ? nn::PositionInAttention::RoPE : nn::PositionInAttention::None;
  nn::MultiHeadAttention mha(kDModel, kHeads, kHeads, 0.0, inside, gen, gen, dtype);
  mha.eval();
  const nn::SinusoidalPositional table(kSeqLen, kDModel, dtype);
  const bool add_table = positions == "sinusoidal";
  const Tensor f_x = attend(mha, table, add_table, x);
  const Tensor f_px = attend(mha, table, add_table, permute_rows(x, p));
  return {"MultiHeadAttention", positions, dtype_name(dtype), permutation_error(f_px, f_x, p), max_abs(f_x)};
}

// The encoder-only model (2 layers, float64) made from a config with model.positional =
// `positions`, on random token ids (1,S) and their permutation.
PermutationCase model_case(const std::string& positions, const std::vector<std::int64_t>& p, std::uint64_t seed) {
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::EncoderOnly;
  cfg.src_vocab = cfg.tgt_vocab = kVocab;
  cfg.d_model = kDModel;
  cfg.n_heads = kHeads;
  cfg.d_ff = 2 * kDModel;
  cfg.encoder_layers = kLayers;
  cfg.dropout = 0.0;
  cfg.max_len = 2 * kSeqLen;
  cfg.positional = nn::parse_positional(positions);
  Generator gen(seed);
  nn::EncoderOnlyTransformer model(cfg, gen, Dtype::Float64);
  model.eval();
  std::vector<std::int64_t> tokens(kSeqLen);
  for (auto& t : tokens) t = 1 + static_cast<std::int64_t>(gen.randint(kVocab - 1));  // never pad 0
  const Tensor ids = from_vector(tokens, {1, kSeqLen});  // (1,S)
  const Tensor f_x = model.encode(ids);                  // (1,S,D)
  return {"encoder-only model", positions, "float64", permutation_error(model.encode(permute_rows(ids, p)), f_x, p),
          max_abs(f_x)};
}

bool case_held(const PermutationCase& c) {
  if (c.positions_used()) return c.max_diff > kBrokenAtLeast;
  return c.max_diff < (c.dtype == "float32" ? kEquivariantF32 : kEquivariantF64);
}

std::string permutation_svg(const PermutationResult& r) {
  std::vector<std::string> labels;
  std::vector<double> values;
  for (const PermutationCase& c : r.cases) {
    labels.push_back(c.module + ", " + c.positions + ", " + c.dtype);
    values.push_back(c.max_diff);
  }
  train::SvgWriter svg(760, 120 + 22.0 * values.size() + 60);
  svg.text(16, 26, "demo permutation: max |f(Px) - P f(x)| / 置换等变性", {.size = train::kTitleFont, .bold = true});
  draw_log_bars(svg, 16, 70, 720, labels, values, kEquivariantF32,
                "green: equal up to rounding (no positions); red: positions break equivariance");
  svg.text(16, 100 + 22.0 * values.size() + 20,
           "dashed: 1e-5 (float32 rounding bound). Without positions attention cannot tell where a token stands.",
           {.size = train::kTickFont});
  return svg.finish();
}

void print_permutation(const PermutationResult& r, std::ostream& out) {
  print_heading(out, "permutation equivariance / 置换等变性");
  out << "S = " << r.seq_len << " positions, d_model " << r.d_model << ", " << r.n_heads << " heads; the model has "
      << r.layers << " encoder layers.\nP moves every position: (P x)_i = x_p[i], p =";
  for (std::int64_t v : r.permutation) out << " " << v;
  out << "\nmeasured: max over positions and features of |f(P x) - P f(x)|  (f(x) itself is O(1): max |f(x)| shown)\n\n";
  out << "  module               positions   dtype     max|f(Px)-Pf(x)|  max|f(x)|  expected\n";
  for (const PermutationCase& c : r.cases) {
    std::string line = "  " + c.module;
    line.resize(23, ' ');
    line += c.positions;
    line.resize(35, ' ');
    line += c.dtype;
    line.resize(45, ' ');
    out << line << sci(c.max_diff) << "          " << fixed(c.output_scale, 3) << "      "
        << (c.positions_used() ? "> 1e-2 (positions: not equivariant)" : "~0 (equivariant)") << "\n";
  }
}

}  // namespace

std::vector<std::int64_t> random_derangement(std::int64_t n, std::uint64_t seed) {
  if (n < 2) throw std::invalid_argument("random_derangement: expected n >= 2, got " + std::to_string(n));
  Generator gen(seed);
  std::vector<std::int64_t> p(n);
  for (;;) {  // shuffle until nothing stays in place (about e tries on average)
    for (std::int64_t i = 0; i < n; ++i) p[i] = i;
    for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[gen.randint(i + 1)]);
    bool moved = true;
    for (std::int64_t i = 0; i < n; ++i) moved = moved && p[i] != i;
    if (moved) return p;
  }
}

Tensor permute_rows(const Tensor& x, const std::vector<std::int64_t>& p) {
  return index_select(x, 1, from_vector(p, {static_cast<std::int64_t>(p.size())}));
}

double permutation_error(const Tensor& f_px, const Tensor& f_x, const std::vector<std::int64_t>& p,
                         const std::vector<std::int64_t>& check) {
  std::vector<std::int64_t> rows = check;
  if (rows.empty())
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(p.size()); ++i) rows.push_back(i);
  double worst = 0;
  for (std::int64_t b = 0; b < f_x.size(0); ++b)
    for (std::int64_t i : rows)
      for (std::int64_t d = 0; d < f_x.size(2); ++d)
        worst = std::max(worst, std::abs(f_px.at({b, i, d}) - f_x.at({b, p[i], d})));
  return worst;
}

PermutationResult compute_permutation(std::uint64_t seed) {
  PermutationResult r{kSeqLen, kDModel, kHeads, kLayers, random_derangement(kSeqLen, seed), {}};
  r.cases.push_back(attention_case("none", Dtype::Float64, r.permutation, seed));
  r.cases.push_back(attention_case("none", Dtype::Float32, r.permutation, seed));
  r.cases.push_back(attention_case("sinusoidal", Dtype::Float64, r.permutation, seed));
  r.cases.push_back(attention_case("rope", Dtype::Float64, r.permutation, seed));
  for (const char* positions : {"none", "sinusoidal", "rope"})
    r.cases.push_back(model_case(positions, r.permutation, seed));
  return r;
}

int run_permutation_demo(const DemoOptions& options, std::ostream& out) {
  const PermutationResult r = compute_permutation(options.seed);
  print_permutation(r, out);
  bool held = true;
  for (const PermutationCase& c : r.cases) held = held && case_held(c);
  out << "\nWithout positions the attention weights of (P x) are the weights of x with rows and columns\n"
         "permuted, so every output row moves with its input row. Positions (added or rotated in) make a\n"
         "token's output depend on where it stands. / 没有位置信息时，自注意力对输入的排列是等变的。\n"
      << verdict(held) << "\n";
  save_demo_svg(options, "permutation", permutation_svg(r), out);
  return held ? 0 : 1;
}

Json permutation_report(const DemoOptions& options) {
  const PermutationResult r = compute_permutation(options.seed);
  bool held = true;
  std::vector<std::string> labels;
  std::vector<double> diffs;
  std::vector<std::vector<Json>> rows;
  for (const PermutationCase& c : r.cases) {
    held = held && case_held(c);
    labels.push_back(c.module + ", " + c.positions + ", " + c.dtype);
    diffs.push_back(c.max_diff);
    rows.push_back({c.module, c.positions, c.dtype, c.max_diff, c.output_scale,
                    c.positions_used() ? bilingual("broken", "被打破") : bilingual("equivariant", "等变")});
  }
  return {{"held", held},
          {"numbers", {number(bilingual("sequence length", "序列长度"), r.seq_len), number(bilingual("d_model", "d_model"), r.d_model)}},
          {"figures", {bars_figure(bilingual("max |f(Px) - P f(x)| (log scale): ~1e-16 is rounding, ~1 is broken",
                                             "max |f(Px) - P f(x)|（对数坐标）：~1e-16 只是舍入误差，~1 表示被打破"),
                                   labels, {bar_series(bilingual("max difference", "最大差"), diffs)}, true),
                       table_figure(bilingual("every case", "所有情形"),
                                    {bilingual("module", "模块"), bilingual("positions", "位置编码"), bilingual("dtype", "精度"),
                                     bilingual("max |f(Px) - P f(x)|", "max |f(Px) - P f(x)|"), bilingual("max |f(x)|", "max |f(x)|"),
                                     bilingual("expected", "预期")},
                                    rows)}}};
}

}  // namespace sf::lessons
