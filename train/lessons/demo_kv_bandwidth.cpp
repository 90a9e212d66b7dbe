// Demo `kv-bandwidth`: see demo_kv_bandwidth.h for what is measured and why.
//
// Letters: B rows, T cached positions, D d_model, H query heads, Hkv key/value heads, Dh head width.
#include "train/lessons/demo_kv_bandwidth.h"

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
#include "autograd/runtime/memory_stats.h"
#include "autograd/runtime/threads.h"
#include "autograd/tensor.h"
#include "nn/decoder_only.h"
#include "nn/model.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {
namespace {

constexpr std::int64_t kVocab = 64;
constexpr std::int64_t kFloat32Bytes = 4;

nn::ModelConfig bandwidth_config(const KvBandwidthSettings& s, std::int64_t kv_heads, std::int64_t window,
                                 std::int64_t max_len) {
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::DecoderOnly;
  cfg.src_vocab = cfg.tgt_vocab = kVocab;
  cfg.d_model = s.d_model;
  cfg.n_heads = s.n_heads;
  cfg.n_kv_heads = kv_heads;
  cfg.d_ff = 2 * s.d_model;
  cfg.decoder_layers = s.layers;
  cfg.dropout = 0;
  cfg.positional = nn::PositionalKind::RoPE;
  cfg.max_len = max_len;
  cfg.attention_window = window;
  return cfg;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The stream-style loop: read `bytes` of floats once and add them up, on the decoding's threads.
// Best of five passes (the first also brings the pages in); returns GB/s.
double stream_read_gb_per_s(std::int64_t bytes) {
  std::vector<float> a(static_cast<std::size_t>(bytes / 4 / 4096 * 4096), 1.0f);
  const auto n = static_cast<std::int64_t>(a.size());
  double best = 0, total = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    // Chunks of 4096 floats summed with vector instructions (one chain of scalar adds would be
    // bound by the adder's latency, not by memory), the chunks' sums added in double.
    double sum = 0;
    const std::int64_t chunks = n / 4096;
    const float* data = a.data();
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
      float part = 0;
#pragma omp simd reduction(+ : part)
      for (std::int64_t i = c * 4096; i < (c + 1) * 4096; ++i) part += data[i];
      sum += part;
    }
    const double s = seconds_since(start);
    total += sum;
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  if (total != 5.0 * static_cast<double>(n)) throw std::logic_error("demo kv-bandwidth: the stream loop miscounted");
  return best;
}

// A decoding state whose every layer holds a full ring of T random keys and values, as if T
// tokens had been decoded (a prefill of T would cost T^2 here, and the numbers do not matter).
std::unique_ptr<nn::DecoderOnlyState> filled_state(const nn::ModelConfig& cfg, std::int64_t batch, std::int64_t T,
                                                   Generator& gen) {
  auto state = std::make_unique<nn::DecoderOnlyState>();
  state->layers.resize(static_cast<std::size_t>(cfg.decoder_layers));
  for (nn::KVCache& layer : state->layers) {
    layer.k = randn({batch, cfg.kv_heads(), T, cfg.head_dim()}, gen);
    layer.v = randn({batch, cfg.kv_heads(), T, cfg.head_dim()}, gen);
    layer.window = T;  // a full ring: each step overwrites one slot and reads all T
    layer.written = T;
  }
  state->first = full({batch, 1}, 1.0, Dtype::Int64);
  return state;
}

KvBandwidthPoint measure_point(const KvBandwidthSettings& s, std::int64_t kv_heads, std::int64_t T,
                               std::uint64_t seed) {
  const nn::ModelConfig cfg = bandwidth_config(s, kv_heads, T, T + s.steps + 1);
  Generator gen(seed);
  const auto model = nn::make_model(cfg, gen);
  model->eval();
  auto state = filled_state(cfg, s.batch, T, gen);
  KvBandwidthPoint p;
  p.kv_heads = kv_heads;
  p.cache_length = T;
  p.kv_bytes = state->cache_bytes();
  p.kv_bytes_formula = 2 * s.layers * s.batch * kv_heads * T * cfg.head_dim() * kFloat32Bytes;
  std::vector<double> times;
  const Tensor token = full({s.batch, 1}, 1.0, Dtype::Int64);
  for (int i = 0; i < s.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    model->decode_step(token, *state);
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  p.step_seconds = times[times.size() / 2];
  return p;
}

// Generates `n` tokens from a one-token prompt; returns the tensor bytes the state keeps alive.
std::int64_t live_bytes_after(const nn::Model& model, std::int64_t batch, std::int64_t n) {
  const std::int64_t before = memory_stats().live_bytes;
  auto state = model.start_decoding(full({batch, 1}, 1.0, Dtype::Int64));
  const Tensor token = full({batch, 1}, 1.0, Dtype::Int64);
  for (std::int64_t t = 0; t < n; ++t) model.decode_step(token, *state);
  return memory_stats().live_bytes - before;
}

std::vector<KvMemoryRow> measure_memory(const KvBandwidthSettings& s, std::uint64_t seed) {
  const std::int64_t max_len = s.generated.empty() ? 1 : *std::max_element(s.generated.begin(), s.generated.end()) + 1;
  Generator g1(seed), g2(seed);
  const auto full_model = nn::make_model(bandwidth_config(s, s.kv_heads.back(), 0, max_len), g1);
  const auto ring_model = nn::make_model(bandwidth_config(s, s.kv_heads.back(), s.window, max_len), g2);
  full_model->eval();
  ring_model->eval();
  std::vector<KvMemoryRow> rows;
  for (std::int64_t n : s.generated)
    rows.push_back({n, live_bytes_after(*full_model, s.batch, n), live_bytes_after(*ring_model, s.batch, n)});
  return rows;
}

bool check_claim(const KvBandwidthResult& r) {
  const KvBandwidthSettings& s = r.settings;
  bool ok = !r.points.empty() && r.memory.size() >= 2;
  for (const KvBandwidthPoint& p : r.points) {
    const KvBandwidthPoint& mha = r.points[static_cast<std::size_t>(&p - &r.points[0]) % s.cache_lengths.size()];
    ok = ok && p.kv_bytes == p.kv_bytes_formula && p.kv_bytes * mha.kv_heads == mha.kv_bytes * p.kv_heads;
  }
  for (const KvMemoryRow& m : r.memory)
    ok = ok && m.ring_live_bytes == r.memory.front().ring_live_bytes && m.full_live_bytes > 0;
  for (std::size_t i = 1; i < r.memory.size(); ++i)
    ok = ok && r.memory[i].full_live_bytes > r.memory[i - 1].full_live_bytes;
  return ok;
}

}  // namespace

KvBandwidthResult compute_kv_bandwidth(std::uint64_t seed, const KvBandwidthSettings& settings) {
  if (settings.kv_heads.empty() || settings.cache_lengths.empty() || settings.steps < 1 ||
      settings.d_model % settings.n_heads != 0)
    throw std::invalid_argument("demo kv-bandwidth: expected kv_heads and cache_lengths listed, steps >= 1 and d_model " +
                                std::to_string(settings.d_model) + " divisible by n_heads " +
                                std::to_string(settings.n_heads));
  KvBandwidthResult r;
  r.settings = settings;
  r.head_dim = settings.d_model / settings.n_heads;
  NoGradGuard no_grad;
  r.stream_gb_per_s = stream_read_gb_per_s(settings.stream_bytes);
  for (std::int64_t kv : settings.kv_heads)
    for (std::int64_t T : settings.cache_lengths) r.points.push_back(measure_point(settings, kv, T, seed));
  r.memory = measure_memory(settings, seed);
  r.claim_holds = check_claim(r);
  return r;
}

namespace {

const char* variant_name(std::int64_t kv, std::int64_t heads) { return kv == heads ? "MHA" : (kv == 1 ? "MQA" : "GQA"); }

std::string mib(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / (1 << 20), 2) + " MiB"; }

void print_kv_bandwidth(const KvBandwidthResult& r, std::ostream& out) {
  const KvBandwidthSettings& s = r.settings;
  out << "Decoding is bandwidth-bound / 解码受内存带宽限制\n"
      << "  decoder-only: D " << s.d_model << ", H " << s.n_heads << ", Dh " << r.head_dim << ", " << s.layers
      << " layers, B " << s.batch << " rows, float32, RoPE; each step reads the whole cache (a full ring of T)\n"
      << "  threads: " << num_threads() << "; stream-style read loop over " << mib(s.stream_bytes) << ": "
      << fixed(r.stream_gb_per_s, 1) << " GB/s (this machine, this run)\n\n"
      << "  variant  Hkv        T   KV bytes/step (= formula)   step ms   KV GB/s   of stream\n";
  for (const KvBandwidthPoint& p : r.points)
    out << "  " << std::left << std::setw(7) << variant_name(p.kv_heads, s.n_heads) << std::right << std::setw(5)
        << p.kv_heads << std::setw(9) << p.cache_length << std::setw(14) << mib(p.kv_bytes)
        << (p.kv_bytes == p.kv_bytes_formula ? " (=)        " : " (!= formula)") << std::setw(10)
        << fixed(p.step_seconds * 1e3, 3) << std::setw(10) << fixed(p.gb_per_s(), 2) << std::setw(10)
        << fixed(100 * p.gb_per_s() / r.stream_gb_per_s, 0) << "%\n";
  out << "  KV GB/s = KV bytes / step time, a lower bound: the step also reads the weights and computes.\n"
      << "  At long T the step time grows with the bytes read, and GQA/MQA, reading " << s.n_heads
      << "/Hkv times fewer, step faster.\n\n"
      << "A sliding window bounds the cache / 滑动窗口让缓存有上限 (Hkv " << s.kv_heads.back() << ", W " << s.window
      << ", live tensor bytes of the decoding state)\n"
      << "  generated   full cache    ring of W\n";
  for (const KvMemoryRow& m : r.memory)
    out << std::setw(11) << m.generated << std::setw(14) << mib(m.full_live_bytes) << std::setw(13)
        << mib(m.ring_live_bytes) << "\n";
  out << verdict(r.claim_holds) << "\n";
}

std::string kv_bandwidth_svg(const KvBandwidthResult& r) {
  const KvBandwidthSettings& s = r.settings;
  train::SvgWriter svg(1000, 450);
  svg.text(20, 26, "decoding reads the KV cache: step time and bandwidth against the cache length / 解码读取 KV 缓存",
           {.size = train::kTitleFont, .bold = true});
  std::vector<Series> time, speed;
  for (std::size_t v = 0; v < s.kv_heads.size(); ++v) {
    const std::string name = std::string(variant_name(s.kv_heads[v], s.n_heads)) + " (Hkv " +
                             std::to_string(s.kv_heads[v]) + ")";
    Series t{name, colour(v), {}}, g{name, colour(v), {}};
    for (const KvBandwidthPoint& p : r.points)
      if (p.kv_heads == s.kv_heads[v]) {
        t.points.push_back({static_cast<double>(p.cache_length), p.step_seconds * 1e3});
        g.points.push_back({static_cast<double>(p.cache_length), p.gb_per_s()});
      }
    time.push_back(t);
    speed.push_back(g);
  }
  Series stream{"stream read loop", "#444444", {}, true};
  for (std::int64_t T : s.cache_lengths) stream.points.push_back({static_cast<double>(T), r.stream_gb_per_s});
  speed.push_back(stream);
  draw_log_lines(svg, 90, 70, 360, 300, "decode step time / 每步解码时间", "cached positions T / 缓存长度", "ms", time);
  draw_log_lines(svg, 590, 70, 360, 300, "KV bytes read per second / 读取带宽", "cached positions T / 缓存长度", "GB/s",
                 speed);
  return svg.finish();
}

}  // namespace

int run_kv_bandwidth_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "kv-bandwidth"));
  const KvBandwidthResult r = compute_kv_bandwidth(options.seed);
  print_kv_bandwidth(r, out);
  save_demo_svg(options, "kv-bandwidth", kv_bandwidth_svg(r), out);
  return r.claim_holds ? 0 : 1;
}

Json kv_bandwidth_json(const KvBandwidthResult& r) {
  std::vector<Json> series;
  for (std::int64_t hkv : r.settings.kv_heads) {
    std::vector<double> t, ms;
    for (const KvBandwidthPoint& p : r.points)
      if (p.kv_heads == hkv) t.push_back(static_cast<double>(p.cache_length)), ms.push_back(p.step_seconds * 1e3);
    const std::string name = hkv == r.settings.n_heads ? "MHA" : hkv == 1 ? "MQA" : "GQA";
    series.push_back(line_series(name + " (Hkv " + std::to_string(hkv) + ")", t, ms));
  }
  std::vector<std::vector<Json>> memory;
  for (const KvMemoryRow& m : r.memory) memory.push_back({m.generated, m.full_live_bytes, m.ring_live_bytes});
  std::vector<std::vector<Json>> points;
  for (const KvBandwidthPoint& p : r.points)
    points.push_back({p.kv_heads, p.cache_length, p.kv_bytes, p.kv_bytes_formula, p.step_seconds * 1e3, p.gb_per_s()});
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("a plain read loop, GB/s (this machine)", "简单读内存循环的带宽 GB/s（本机）"), r.stream_gb_per_s),
                       number(bilingual("the window W of the ring", "环形缓存的窗口 W"), r.settings.window)}},
          {"figures", {lines_figure(bilingual("one decoding step's time against the tokens in the cache", "一步解码的时间随缓存中词元数的变化"),
                                    {bilingual("cached tokens T", "缓存的词元数 T"), bilingual("ms per step", "每步毫秒"), true, true},
                                    std::move(series)),
                       table_figure(bilingual("every point: bytes read per step and the speed of reading them", "每个测量点：每步读取的字节数及读取速度"),
                                    {bilingual("Hkv", "Hkv"), bilingual("T", "T"), bilingual("KV bytes", "KV 字节"),
                                     bilingual("formula", "公式"), bilingual("ms", "毫秒"), bilingual("GB/s", "GB/s")},
                                    points),
                       table_figure(bilingual("live bytes after generating: full cache against a ring of W", "生成之后仍占用的字节：完整缓存与大小为 W 的环形缓存"),
                                    {bilingual("tokens generated", "已生成词元数"), bilingual("full cache bytes", "完整缓存字节"),
                                     bilingual("ring bytes", "环形缓存字节")},
                                    memory)}}};
}

Json kv_bandwidth_report(const DemoOptions& options) { return kv_bandwidth_json(compute_kv_bandwidth(options.seed)); }

}  // namespace sf::lessons
