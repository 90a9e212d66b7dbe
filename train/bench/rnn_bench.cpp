// `scratchformer bench` on a recurrent model: see rnn_bench.h for what is measured and how.
#include "train/bench/rnn_bench.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"
#include "nn/model.h"
#include "train/bench/bench_timing.h"
#include "train/bench/bench_util.h"
#include "train/setup.h"

namespace sf::train {

using namespace bench_util;  // Clock, median, fixed, rounded, time_training, run_decoding, ... (bench_util.h, bench_timing.h)

ModelSection transformer_twin(const ModelSection& rnn) {
  ModelSection t;  // the defaults, then what the comparison fixes
  t.arch = "encoder-decoder";
  t.d_model = rnn.d_model;
  t.n_heads = std::max<std::int64_t>(1, rnn.d_model / 64);
  t.d_ff = 4 * rnn.d_model;
  t.encoder_layers = rnn.encoder_layers;
  t.decoder_layers = rnn.decoder_layers;
  t.dropout = rnn.dropout;
  t.attention_dropout = 0;
  t.norm_position = "post";
  t.positional = "sinusoidal";
  t.attention = "plain";
  t.share_embeddings = true;
  t.tie_output = true;
  t.max_len = rnn.max_len;
  return t;
}

std::vector<RnnLengthRow> rnn_length_rows(const Config& cfg, const BenchOptions& opt) {
  if (nn::parse_arch(cfg.model.arch) != nn::Arch::Rnn)
    throw std::invalid_argument("bench: the length table is the rnn's, got arch " + cfg.model.arch);
  if (opt.rnn_lengths.empty()) throw std::invalid_argument("bench: no sequence length to measure");
  const std::int64_t budget = opt.batch * opt.length;  // target tokens per step, the same in every row
  const std::int64_t V = cfg.data.tokenizer_vocab_size;
  std::vector<RnnLengthRow> rows;
  for (std::int64_t T : opt.rnn_lengths) {
    if (T < 1) throw std::invalid_argument("bench: lengths must be >= 1, got " + std::to_string(T));
    BenchOptions o = opt;
    o.length = T;
    o.batch = std::max<std::int64_t>(1, budget / T);
    o.steps = kScalingSteps;
    o.warmup = kScalingWarmup;
    RnnLengthRow row;
    row.length = T;
    row.batch = o.batch;

    Config rnn = cfg;
    rnn.model.max_len = std::max(rnn.model.max_len, T);
    row.rnn_step_s = time_training(rnn, model_config_from(rnn.model, V, V), o).median_s;

    Config transformer = cfg;
    transformer.model = transformer_twin(rnn.model);
    row.transformer_step_s = time_training(transformer, model_config_from(transformer.model, V, V), o).median_s;
    rows.push_back(row);
  }
  return rows;
}

namespace {

// What run_rnn_bench measured: the JSON line and the table are written from this.
struct RnnBenchReport {
  double load_start = NAN, load_end = NAN, rss_start = NAN, rss_peak = NAN;
  StepTiming step;
  double tokens_per_s = 0;
  std::vector<RnnLengthRow> rows;
  ModelSection twin;  // the Transformer of the length table
  std::int64_t twin_params = 0;
  DecodeReport dec;
};

// The JSON line (tools/bench_pytorch_rnn.py prints the shared fields too).
nlohmann::ordered_json rnn_bench_json(const Config& cfg, const BenchOptions& opt, const RnnBenchReport& r) {
  const bool decoded = r.dec.sentences > 0;
  nlohmann::ordered_json j;
  j["tool"] = "scratchformer";
  j["mode"] = "rnn";
  j["config"] = cfg.source_path;
  j["cpu"] = cpu_model();
  j["blas_core"] = blas_core_name();
  j["threads"] = num_threads();
  j["load_avg_start"] = rounded(r.load_start, 2);
  j["load_avg_end"] = rounded(r.load_end, 2);
  j["params"] = r.step.params;
  j["batch"] = opt.batch;
  j["length"] = opt.length;
  j["warmup"] = opt.warmup;
  j["steps"] = opt.steps;
  add_step_fields(j, r.step);
  j["tokens_per_s"] = rounded(r.tokens_per_s, 1);
  j["rss_peak_mib"] = rounded(r.rss_peak, 1);
  j["transformer_params"] = r.twin_params;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const RnnLengthRow& row : r.rows)
    list.push_back({{"T", row.length},
                    {"batch", row.batch},
                    {"rnn_step_ms", rounded(row.rnn_step_s * 1e3, 2)},
                    {"transformer_step_ms", rounded(row.transformer_step_s * 1e3, 2)}});
  j["rows"] = list;
  j["decode_sentences"] = r.dec.sentences;
  j["greedy_sent_per_s"] = sentences_per_s(r.dec, r.dec.greedy_cache);
  j["beam4_sent_per_s"] = sentences_per_s(r.dec, r.dec.beam_cache);
  j["greedy_nocache_sent_per_s"] = sentences_per_s(r.dec, r.dec.greedy_nocache);
  j["beam4_nocache_sent_per_s"] = sentences_per_s(r.dec, r.dec.beam_nocache);
  j["greedy_tokens"] = decoded ? nlohmann::ordered_json(r.dec.greedy_cache.tokens) : nullptr;
  j["beam4_tokens"] = decoded ? nlohmann::ordered_json(r.dec.beam_cache.tokens) : nullptr;
  j["decode_batch"] = decoded ? nlohmann::ordered_json(r.dec.batch) : nullptr;
  return j;
}

// The table: the setup, the step, the length table, decoding.
void print_rnn_bench(std::ostream& os, const Config& cfg, const BenchOptions& opt, const RnnBenchReport& r) {
  const ModelSection& ms = cfg.model;
  print_machine(os, "", cfg, r.load_start, r.load_end);
  os << "model     rnn, " << ms.rnn_cell << ", " << ms.rnn_attention << " attention, D " << ms.d_model << " (encoder "
     << ms.d_model / 2 << " per direction), layers " << ms.encoder_layers << "+" << ms.decoder_layers << ", V "
     << cfg.data.tokenizer_vocab_size << ", dropout " << ms.dropout << "; " << r.step.params << " parameters\n"
     << "batch     " << opt.batch << " pairs x " << opt.length << " source + " << opt.length
     << " target tokens (random ids, no padding); " << cfg.train.optimizer << ", label smoothing "
     << cfg.train.label_smoothing << "\n\n";
  const StepTiming& step = r.step;
  print_row(os, "training step (median of " + std::to_string(opt.steps) + " after " + std::to_string(opt.warmup) + ")",
            fixed(step.median_s * 1e3, 1) + " ms  (min " + fixed(step.min_s * 1e3, 1) + ", max " +
                fixed(step.max_s * 1e3, 1) + "; loss " + fixed(step.loss, 3) + ")");
  print_row(os, "target tokens/s", fixed(r.tokens_per_s, 0));
  print_row(os, "peak RSS (ru_maxrss)", fixed(r.rss_peak, 1) + " MiB  (" + fixed(r.rss_start, 1) + " MiB at the start)");

  os << "\nstep time against length: " << opt.batch * opt.length
     << " target tokens per step (batch x T, source length = T), median of " << kScalingSteps << " steps after "
     << kScalingWarmup << ";\nthe Transformer: encoder-decoder, D " << r.twin.d_model << ", H " << r.twin.n_heads
     << ", F " << r.twin.d_ff << ", layers " << r.twin.encoder_layers << "+" << r.twin.decoder_layers << ", "
     << r.twin_params << " parameters\n";
  os << std::right << std::setw(6) << "T" << std::setw(7) << "batch" << std::setw(11) << "rnn ms" << std::setw(16)
     << "Transformer ms" << std::setw(14) << "rnn / Transf." << "\n";
  for (const RnnLengthRow& row : r.rows)
    os << std::setw(6) << row.length << std::setw(7) << row.batch << std::setw(11) << fixed(row.rnn_step_s * 1e3, 1)
       << std::setw(16) << fixed(row.transformer_step_s * 1e3, 1) << std::setw(14)
       << fixed(row.rnn_step_s / row.transformer_step_s, 2) << "\n";
  print_decoding(os, cfg, r.dec, "state");
}

}  // namespace

int run_rnn_bench(const Config& cfg, const BenchOptions& opt) {
  if (nn::parse_arch(cfg.model.arch) != nn::Arch::Rnn)
    throw std::invalid_argument("bench: run_rnn_bench needs arch rnn, got " + cfg.model.arch);
  check_options_and_set_threads(cfg, opt);
  RnnBenchReport r;
  r.load_start = load_average_1min();
  r.rss_start = rss_now_mib();

  // 1. training steps on the reference batch, then the peak memory they reached
  const std::int64_t V = cfg.data.tokenizer_vocab_size;
  r.step = time_training(cfg, model_config_from(cfg.model, V, V), opt);
  r.rss_peak = peak_rss_mib();
  r.tokens_per_s = static_cast<double>(opt.batch * opt.length) / r.step.median_s;

  // 2. the length table, against the Transformer of the same width
  r.rows = rnn_length_rows(cfg, opt);
  r.twin = transformer_twin(cfg.model);
  Generator gen(static_cast<std::uint64_t>(cfg.train.seed));
  r.twin_params = nn::make_model(model_config_from(r.twin, V, V), gen)->parameter_count();

  // 3. decoding: the recurrent state as the cache (no bf16 rows: the comparison is float32)
  r.dec = run_decoding(cfg, opt, /*bf16_rows=*/false);
  r.load_end = load_average_1min();

  const nlohmann::ordered_json j = rnn_bench_json(cfg, opt, r);
  if (!opt.json_only) {
    std::ostringstream os;
    print_rnn_bench(os, cfg, opt, r);
    std::cout << os.str() << "\n";
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace sf::train
