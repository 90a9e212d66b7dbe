// Demo `extrapolation`: see demo_extrapolation.h for the experiment.
//
// Letters: B windows, T positions, L the training length, D d_model, V vocabulary (characters).
#include "train/lessons/demo_extrapolation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "nn/decoder_only.h"
#include "nn/model.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/optim/optim.h"
#include "train/data_folder.h"  // corpora_dir: the shipped corpora, found at run time

namespace sf::lessons {

namespace {

// The mean of loss[from, to), or NaN when the range is empty.
double mean_of(const std::vector<double>& loss, std::size_t from, std::size_t to) {
  to = std::min(to, loss.size());
  if (from >= to) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (std::size_t t = from; t < to; ++t) sum += loss[t];
  return sum / static_cast<double>(to - from);
}

}  // namespace

double ExtrapolationCurve::within() const { return mean_of(loss, 0, static_cast<std::size_t>(train_length)); }
double ExtrapolationCurve::beyond() const {
  return mean_of(loss, static_cast<std::size_t>(train_length), loss.size());
}

namespace {

// A scheme "learned the task" when its loss within L is this close to the best one's (nats):
// only those compete for degrading least (a model bad everywhere also rises little).
constexpr double kLearnedMargin = 0.3;

// A text as one stream of character ids: 0 is padding, every distinct byte of the training text
// gets an id from 1 up; a byte the training text never had maps to the last id.
struct CharStream {
  std::map<unsigned char, std::int64_t> ids;
  std::vector<std::int64_t> train, valid;
  std::int64_t vocab() const { return static_cast<std::int64_t>(ids.size()) + 2; }  // + padding, + unknown
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("demo extrapolation: cannot read " + path +
                             " (expected the shipped Multi30k corpus there; point the demo's corpora folder at data/corpora)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CharStream char_stream(const std::string& corpora) {
  const std::string dir = train::corpora_dir(corpora) + "/multi30k/";
  const std::string train = read_text(dir + "train.en"), valid = read_text(dir + "valid.en");
  CharStream c;
  for (unsigned char ch : train)
    if (!c.ids.count(ch)) c.ids[ch] = static_cast<std::int64_t>(c.ids.size()) + 1;
  const std::int64_t unknown = c.vocab() - 1;
  for (unsigned char ch : train) c.train.push_back(c.ids[ch]);
  for (unsigned char ch : valid) c.valid.push_back(c.ids.count(ch) ? c.ids[ch] : unknown);
  return c;
}

// Windows of T + 1 ids from `stream` at `offsets` -> inputs (B,T) and next-character targets (B,T).
std::pair<Tensor, Tensor> windows(const std::vector<std::int64_t>& stream, const std::vector<std::int64_t>& offsets,
                                  std::int64_t T) {
  std::vector<std::int64_t> in, out;
  for (std::int64_t o : offsets)
    for (std::int64_t t = 0; t < T; ++t) {
      in.push_back(stream[static_cast<std::size_t>(o + t)]);
      out.push_back(stream[static_cast<std::size_t>(o + t + 1)]);
    }
  const auto B = static_cast<std::int64_t>(offsets.size());
  return {from_vector(in, {B, T}), from_vector(out, {B, T})};
}

nn::ModelConfig extrapolation_config(const ExtrapolationSettings& s, nn::PositionalKind pos, std::int64_t vocab) {
  nn::ModelConfig c;
  c.arch = nn::Arch::DecoderOnly;
  c.src_vocab = c.tgt_vocab = vocab;
  c.d_model = s.d_model;
  c.n_heads = s.n_heads;
  c.d_ff = 4 * s.d_model;
  c.decoder_layers = s.layers;
  c.dropout = 0;
  c.positional = pos;
  // The learned table has exactly the trained rows; the others compute any position.
  c.max_len = pos == nn::PositionalKind::Learned ? s.train_length : s.eval_factor * s.train_length;
  return c;
}

// Adam on random windows of L characters; returns the mean loss of the last 20 steps.
double train_model(nn::Model& model, const CharStream& text, const ExtrapolationSettings& s, Generator& gen) {
  model.train();
  train::Adam adam(model.named_parameters(), 0.9, 0.98, 1e-9);
  const auto span = static_cast<std::uint64_t>(text.train.size() - static_cast<std::size_t>(s.train_length) - 1);
  std::vector<double> last;
  for (std::int64_t step = 0; step < s.steps; ++step) {
    std::vector<std::int64_t> offsets;
    for (std::int64_t b = 0; b < s.batch; ++b) offsets.push_back(static_cast<std::int64_t>(gen.randint(span)));
    const auto [in, target] = windows(text.train, offsets, s.train_length);
    const Tensor logits = model.forward(Tensor(), in);  // (B,L,V)
    const Tensor loss = cross_entropy(reshape(logits, {-1, logits.size(2)}), reshape(target, {-1}));
    loss.backward();
    train::clip_grad_norm(model.named_parameters(), 1.0);
    adam.step(s.lr * std::min(1.0, static_cast<double>(step + 1) / 50.0));  // 50 steps of warm-up
    adam.zero_grad();
    last.push_back(loss.item());
    if (last.size() > 20) last.erase(last.begin());
  }
  model.eval();
  double sum = 0;
  for (double l : last) sum += l;
  return sum / static_cast<double>(last.size());
}

// The mean loss at each position of windows of T valid characters -> (T).
std::vector<double> loss_by_position(const nn::Model& model, const CharStream& text, const ExtrapolationSettings& s,
                                     std::int64_t T) {
  NoGradGuard no_grad;
  const auto stride = static_cast<std::int64_t>(text.valid.size() - static_cast<std::size_t>(T) - 1) / s.eval_windows;
  std::vector<double> sum(static_cast<std::size_t>(T), 0.0);
  for (std::int64_t first = 0; first < s.eval_windows; first += 8) {  // 8 windows per forward
    std::vector<std::int64_t> offsets;
    for (std::int64_t w = first; w < std::min(first + 8, s.eval_windows); ++w) offsets.push_back(w * stride);
    const auto [in, target] = windows(text.valid, offsets, T);
    const std::vector<float> logp = log_softmax(model.forward(Tensor(), in), -1).contiguous().to_vector<float>();
    const std::vector<std::int64_t> tgt = target.to_vector<std::int64_t>();
    const std::int64_t V = text.vocab();
    for (std::size_t i = 0; i < tgt.size(); ++i)
      sum[i % static_cast<std::size_t>(T)] -= logp[i * static_cast<std::size_t>(V) + static_cast<std::size_t>(tgt[i])];
  }
  for (double& v : sum) v /= static_cast<double>(s.eval_windows);
  return sum;
}

// Scales the RoPE frequencies of every self-attention layer, as model.rope_scaling would have.
void scale_rope(nn::Model& model, nn::RopeScaling scaling, double factor) {
  auto& decoder = dynamic_cast<nn::DecoderOnlyTransformer&>(model);
  for (std::size_t i = 0; i < decoder.layers->size(); ++i) {
    nn::MultiHeadAttention& attn = *(*decoder.layers)[i].self_attn;
    attn.rope = nn::rope_frequencies(scaling, factor, attn.head_dim);
  }
}

ExtrapolationCurve evaluate(const std::string& scheme, nn::Model& model, const CharStream& text,
                            const ExtrapolationSettings& s, double train_loss) {
  ExtrapolationCurve c;
  c.scheme = scheme;
  c.train_length = s.train_length;
  c.train_loss = train_loss;
  try {
    c.loss = loss_by_position(model, text, s, s.eval_factor * s.train_length);
  } catch (const std::invalid_argument& e) {  // learned positions: no row past the table
    c.refused = e.what();
    c.loss = loss_by_position(model, text, s, s.train_length);
  }
  return c;
}

const ExtrapolationCurve& curve(const ExtrapolationResult& r, const std::string& scheme) {
  for (const ExtrapolationCurve& c : r.curves)
    if (c.scheme == scheme) return c;
  throw std::logic_error("demo extrapolation: no curve " + scheme);
}

// The least degrading scheme, then the claim (see the header of compute_extrapolation's result).
void judge(ExtrapolationResult& r) {
  double best_within = std::numeric_limits<double>::infinity();
  for (const ExtrapolationCurve& c : r.curves) best_within = std::min(best_within, c.within());
  double best_rise = std::numeric_limits<double>::infinity();
  for (const ExtrapolationCurve& c : r.curves) {
    const double rise = c.beyond() - c.within();
    if (!c.refused.empty() || c.within() > best_within + kLearnedMargin || !(rise < best_rise)) continue;
    best_rise = rise;
    r.least_degrading = c.scheme;
  }
  const std::string x = " x" + std::to_string(r.settings.eval_factor);
  const ExtrapolationCurve &sinusoidal = curve(r, "sinusoidal"), &rope = curve(r, "rope"),
                           &alibi = curve(r, "alibi"), &ntk = curve(r, "rope + ntk" + x),
                           &pi = curve(r, "rope + interpolation" + x);
  const auto rise = [](const ExtrapolationCurve& c) { return c.beyond() - c.within(); };
  r.claims = {
      {"learned positions refuse past their table", !curve(r, "learned").refused.empty()},
      {"sinusoidal and RoPE rise past L by 0.5 nats more than ALiBi",
       rise(sinusoidal) > rise(alibi) + 0.5 && rise(rope) > rise(alibi) + 0.5},
      {"NTK scaling lowers RoPE's loss past L by 0.3 nats and keeps it within L (0.1)",
       ntk.beyond() < rope.beyond() - 0.3 && ntk.within() < rope.within() + 0.1},
      {"interpolation without fine-tuning costs 0.5 nats within L and ends 0.5 above NTK past L",
       pi.within() > rope.within() + 0.5 && pi.beyond() > ntk.beyond() + 0.5},
      {"ALiBi degrades least", r.least_degrading == "alibi"},
  };
  r.claim_holds = true;
  for (const auto& [text, held] : r.claims) r.claim_holds = r.claim_holds && held;
}

}  // namespace

ExtrapolationResult compute_extrapolation(std::uint64_t seed, const std::string& corpora,
                                          const ExtrapolationSettings& s) {
  if (s.train_length < 2 || s.eval_factor < 2 || s.steps < 1 || s.eval_windows < 1 || s.d_model % s.n_heads != 0)
    throw std::invalid_argument("demo extrapolation: expected train_length >= 2, eval_factor >= 2, steps >= 1, "
                                "eval_windows >= 1 and d_model divisible by n_heads");
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountScope one_thread(1);  // a D 64 model: a second thread only waits
  const CharStream text = char_stream(corpora);
  ExtrapolationResult r;
  r.settings = s;
  r.vocab = text.vocab();
  const std::vector<std::pair<std::string, nn::PositionalKind>> schemes = {
      {"sinusoidal", nn::PositionalKind::Sinusoidal}, {"learned", nn::PositionalKind::Learned},
      {"rope", nn::PositionalKind::RoPE},             {"alibi", nn::PositionalKind::ALiBi},
      {"none", nn::PositionalKind::None}};
  for (const auto& [name, kind] : schemes) {
    Generator gen(seed);  // every scheme: the same initial draws where shapes agree, the same windows
    const auto model = nn::make_model(extrapolation_config(s, kind, r.vocab), gen);
    const double train_loss = train_model(*model, text, s, gen);
    r.curves.push_back(evaluate(name, *model, text, s, train_loss));
    if (kind != nn::PositionalKind::RoPE) continue;
    const std::string x = " x" + std::to_string(s.eval_factor);
    scale_rope(*model, nn::RopeScaling::Interpolation, static_cast<double>(s.eval_factor));
    r.curves.push_back(evaluate("rope + interpolation" + x, *model, text, s, train_loss));
    scale_rope(*model, nn::RopeScaling::Ntk, static_cast<double>(s.eval_factor));
    r.curves.push_back(evaluate("rope + ntk" + x, *model, text, s, train_loss));
  }
  judge(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

namespace {

void print_extrapolation(const ExtrapolationResult& r, std::ostream& out) {
  const ExtrapolationSettings& s = r.settings;
  const std::int64_t L = s.train_length, T = s.eval_factor * L;
  out << "Train short, test long / 短训练、长测试：位置编码的外推\n"
      << "  next-character models on Multi30k English (" << r.vocab << " ids), decoder-only D " << s.d_model << ", H "
      << s.n_heads << ", " << s.layers << " layers, trained " << s.steps << " steps on windows of L = " << L
      << ", scored on " << s.eval_windows << " validation windows of " << T << "\n\n"
      << "  mean loss (nats per character) by position\n  " << std::left << std::setw(26) << "scheme" << std::right;
  for (std::int64_t b = 0; b < T; b += s.bucket) out << std::setw(9) << (std::to_string(b) + "-" + std::to_string(b + s.bucket - 1));
  out << "   past L - before L\n";
  for (const ExtrapolationCurve& c : r.curves) {
    out << "  " << std::left << std::setw(26) << c.scheme << std::right;
    for (std::int64_t b = 0; b < T; b += s.bucket) {
      if (b >= static_cast<std::int64_t>(c.loss.size())) {
        out << std::setw(9) << "-";
        continue;
      }
      double sum = 0;
      for (std::int64_t t = b; t < b + s.bucket; ++t) sum += c.loss[static_cast<std::size_t>(t)];
      out << std::setw(9) << fixed(sum / static_cast<double>(s.bucket), 3);
    }
    out << std::setw(12) << (c.refused.empty() ? fixed(c.beyond() - c.within(), 3) : std::string("refused")) << "\n";
  }
  for (const ExtrapolationCurve& c : r.curves)
    if (!c.refused.empty()) out << "\n  " << c.scheme << " past " << L << ": " << c.refused << "\n";
  out << "\n  least rise past L (among the schemes within " << fixed(kLearnedMargin, 1)
      << " nats of the best loss before L): " << r.least_degrading << "\n";
  for (const auto& [text, held] : r.claims) out << "  [" << (held ? "yes" : "NO ") << "] " << text << "\n";
  out << "  time: " << fixed(r.seconds, 0)
      << " s (this machine, this run)\n"
      << verdict(r.claim_holds) << "\n";
}

std::string extrapolation_svg(const ExtrapolationResult& r) {
  const ExtrapolationSettings& s = r.settings;
  const std::int64_t L = s.train_length, T = s.eval_factor * L;
  train::SvgWriter svg(1000, 480);
  svg.text(20, 26, "train on " + std::to_string(L) + " characters, test on " + std::to_string(T) +
                       ": loss by position / 在 " + std::to_string(L) + " 个字符上训练、在 " + std::to_string(T) +
                       " 个字符上测试：各位置的损失",
           {.size = train::kTitleFont, .bold = true});
  double hi = 0;
  for (const ExtrapolationCurve& c : r.curves)
    for (double v : c.loss) hi = std::max(hi, v);
  const train::Frame f{80, 60, 640, 360, train::make_axis(0, static_cast<double>(T), 8),
                       train::make_axis(0, std::min(hi, 8.0), 6)};
  train::draw_frame(svg, f, "position (mean of every 8) / 位置（每 8 个取平均）", "loss (nats per character) / 损失", "");
  svg.line(f.px(static_cast<double>(L)), f.y, f.px(static_cast<double>(L)), f.y + f.h, {.stroke = "#444444", .dash = "5 3"});
  svg.text(f.px(static_cast<double>(L)) + 4, f.y + 14, "L = " + std::to_string(L) + " (trained up to here / 训练长度)",
           {.size = 11});
  double legend_y = 80;
  for (std::size_t i = 0; i < r.curves.size(); ++i) {
    const ExtrapolationCurve& c = r.curves[i];
    std::vector<std::pair<double, double>> pts;  // the mean of every 8 positions, at their middle
    for (std::size_t t = 0; t + 8 <= c.loss.size(); t += 8)
      pts.push_back({f.px(static_cast<double>(t) + 3.5), f.py(std::min(mean_of(c.loss, t, t + 8), f.ay.hi))});
    svg.polyline(pts, {.stroke = colour(i), .stroke_width = 1.5});
    svg.line(740, legend_y - 4, 762, legend_y - 4, {.stroke = colour(i), .stroke_width = 3});
    svg.text(766, legend_y, c.scheme + (c.refused.empty() ? "" : " (refuses past L / 超出 L 拒绝)"), {.size = 11});
    legend_y += 18;
  }
  return svg.finish();
}

}  // namespace

int run_extrapolation_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "extrapolation"));
  const ExtrapolationResult r = compute_extrapolation(options.seed, options.corpora);
  print_extrapolation(r, out);
  save_demo_svg(options, "extrapolation", extrapolation_svg(r), out);
  return r.claim_holds ? 0 : 1;
}

Json extrapolation_json(const ExtrapolationResult& r) {
  std::vector<Json> series;
  std::vector<std::vector<Json>> rows;
  for (const ExtrapolationCurve& c : r.curves) {
    // the mean loss over buckets of positions: a readable line, as the SVG draws it
    std::vector<double> x, y;
    const auto bucket = static_cast<std::size_t>(r.settings.bucket);
    for (std::size_t b = 0; b + bucket <= c.loss.size(); b += bucket) {
      double sum = 0;
      for (std::size_t i = b; i < b + bucket; ++i) sum += c.loss[i];
      x.push_back(static_cast<double>(b + bucket / 2)), y.push_back(sum / static_cast<double>(bucket));
    }
    if (!x.empty()) series.push_back(line_series(c.scheme, x, y));
    rows.push_back({c.scheme, c.within(), c.refused.empty() ? Json(c.beyond()) : Json(c.refused),
                    c.refused.empty() ? Json(c.beyond() - c.within()) : Json(nullptr)});
  }
  std::vector<std::vector<Json>> claims;
  for (const auto& [claim, held] : r.claims) claims.push_back({claim, held ? bilingual("holds", "成立") : bilingual("does NOT hold", "不成立")});
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("training length L", "训练长度 L"), r.settings.train_length),
                       number(bilingual("scored up to", "评估到的长度"), r.settings.train_length * r.settings.eval_factor),
                       number(bilingual("the scheme that degrades least past L", "超过 L 后退化最少的方案"), r.least_degrading)}},
          {"figures", {lines_figure(bilingual("next-character loss by position (mean over windows)", "按位置的下一个字符损失（各窗口平均）"),
                                    {bilingual("position", "位置"), bilingual("loss (nats)", "损失（奈特）")}, std::move(series),
                                    {{static_cast<double>(r.settings.train_length), bilingual("L", "L")}}),
                       table_figure(bilingual("mean loss before and past L", "L 之前与之后的平均损失"),
                                    {bilingual("scheme", "方案"), bilingual("before L", "L 之前"), bilingual("past L", "L 之后"),
                                     bilingual("rise", "上升")},
                                    rows),
                       table_figure(bilingual("the claims", "结论"), {bilingual("claim", "结论"), bilingual("verdict", "判定")}, claims)}}};
}

Json extrapolation_report(const DemoOptions& options) { return extrapolation_json(compute_extrapolation(options.seed, options.corpora)); }

}  // namespace sf::lessons
