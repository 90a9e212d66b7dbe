// Timing shared by the bench modes: see bench_timing.h.
#include "train/bench/bench_timing.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <stdexcept>

#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/threads.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "train/bench/bench_util.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"

namespace sf::train::bench_util {

namespace fs = std::filesystem;

// ---- the machine ---------------------------------------------------------------------------

double rss_now_mib() {
  std::ifstream in("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(in >> size >> resident)) return NAN;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_rss_mib() {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// ---- training ------------------------------------------------------------------------------

std::unique_ptr<Optimizer> make_optimizer(const TrainSection& t, NamedParameters params) {
  if (t.optimizer == "adam") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, false);
  if (t.optimizer == "adamw") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, true);
  if (t.optimizer == "sgd") return std::make_unique<SGD>(std::move(params), t.momentum, t.weight_decay);
  throw std::invalid_argument("train.optimizer: expected adam, adamw or sgd, got '" + t.optimizer + "'");
}

StepTiming time_training(const Config& cfg, const nn::ModelConfig& mcfg, const BenchOptions& opt) {
  Generator gen(static_cast<std::uint64_t>(cfg.train.seed));
  const std::unique_ptr<nn::Model> built = nn::make_model(mcfg, gen);
  nn::Model& model = *built;
  model.train();
  std::unique_ptr<Optimizer> optimizer = make_optimizer(cfg.train, model.named_parameters());
  const RandomBatch batch = random_batch_for(mcfg, opt.batch, opt.length, gen);
  StepTiming r;
  r.params = model.parameter_count();
  std::vector<double> times;
  for (std::int64_t i = 0; i < opt.warmup + opt.steps; ++i) {
    const auto start = Clock::now();
    r.loss = training_step(model, *optimizer, batch, cfg.train, cfg.train.lr);
    if (i >= opt.warmup) times.push_back(seconds_since(start));
  }
  r.median_s = median(times);
  r.min_s = *std::min_element(times.begin(), times.end());
  r.max_s = *std::max_element(times.begin(), times.end());
  return r;
}

void add_step_fields(nlohmann::ordered_json& j, const StepTiming& step) {
  j["step_ms"] = rounded(step.median_s * 1e3, 2);
  j["step_ms_min"] = rounded(step.min_s * 1e3, 2);
  j["step_ms_max"] = rounded(step.max_s * 1e3, 2);
  j["loss"] = rounded(step.loss, 4);
}

// ---- decoding ------------------------------------------------------------------------------

namespace {

constexpr std::int64_t kDecodeBeam = 4;  // the beam size benchmarked beside greedy
constexpr const char* kDecodeSourcesFile = "bench-decode-sources.txt";

// Decodes every source as translate_all does (sorted by length, batches of `per_batch`, as many
// at once as threads: translate_batches), timing only the decoding. The batches' own times on
// their threads split the wall time into prefill and decode: prefill = wall x (sum of the
// batches' prefills / sum of the batches' times), so the two still add up to the wall time.
DecodeTiming time_decoding(const nn::Model& model, const std::vector<std::vector<std::int64_t>>& sources,
                           const DecodeOptions& options, std::int64_t per_batch) {
  const SortedBatches sorted = sort_into_batches(sources, per_batch, /*same_length=*/false);
  DecodeTiming r;
  r.sentences = static_cast<std::int64_t>(sources.size());
  double prefill = 0;
  DecodeOptions timed = options;
  timed.prefill_seconds = &prefill;
  std::vector<double> batch_seconds;
  const auto t0 = Clock::now();
  const auto out = translate_batches(model, sorted.batches, timed, &batch_seconds);
  r.seconds = seconds_since(t0);
  const double busy = std::accumulate(batch_seconds.begin(), batch_seconds.end(), 0.0);
  r.prefill_seconds = busy > 0 ? r.seconds * prefill / busy : 0;
  for (const auto& batch : out)
    for (const auto& ids : batch) r.tokens += static_cast<std::int64_t>(ids.size());
  return r;
}

// The first n non-empty, valid lines of `path`, encoded, each cut to max_tokens.
std::vector<std::vector<std::int64_t>> decode_sources(const std::string& path, const data::Tokenizer& tok,
                                                      std::int64_t n, std::int64_t max_tokens) {
  std::vector<std::vector<std::int64_t>> out;
  for (const std::string& line : data::read_lines(path)) {
    if (static_cast<std::int64_t>(out.size()) >= n) break;
    if (line.empty() || !data::valid_utf8(line)) continue;
    std::vector<std::int64_t> ids = tok.encode(line);
    if (ids.empty()) continue;
    if (static_cast<std::int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<std::size_t>(max_tokens));
    out.push_back(std::move(ids));
  }
  return out;
}

void write_sources(const fs::path& path, const std::vector<std::vector<std::int64_t>>& sources) {
  std::ofstream out(path);
  for (const auto& ids : sources) {
    for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << "\n";
  }
  if (!out.flush()) throw std::runtime_error("bench: cannot write " + path.string());
}

}  // namespace

DecodeReport run_decoding(const Config& cfg, const BenchOptions& opt, bool bf16_rows) {
  DecodeReport r;
  // translation decoding is the encoder-decoder's and the rnn's (a decoder-only model: bench --generation)
  if (opt.decode_sentences <= 0 || (cfg.model.arch != "encoder-decoder" && cfg.model.arch != "rnn")) return r;
  if (cfg.data.test_src.empty())
    throw std::invalid_argument("bench: data.test_src is empty; decoding needs a test set (or --decode-sentences 0)");

  // the model and its tokenizer: a checkpoint's, or a random model beside the run's tokenizer
  std::unique_ptr<InferenceModel> trained;
  std::unique_ptr<Tokenizers> tok;
  std::unique_ptr<Generator> gen;
  std::unique_ptr<nn::Model> random_model;
  const nn::Model* model = nullptr;
  const data::Tokenizer* src_tok = nullptr;
  if (!opt.checkpoint.empty()) {
    trained = std::make_unique<InferenceModel>(load_inference_model(opt.checkpoint));
    model = trained->model.get();
    src_tok = &trained->tokenizers->src;
    r.model = "checkpoint";
  } else {
    tok = std::make_unique<Tokenizers>(load_or_train_tokenizers(cfg, static_cast<std::uint64_t>(cfg.train.seed)));
    gen = std::make_unique<Generator>(static_cast<std::uint64_t>(cfg.train.seed));
    random_model = nn::make_model(model_config_from(cfg.model, tok->src.vocab_size(), tok->tgt.vocab_size()), *gen);
    random_model->eval();
    model = random_model.get();
    src_tok = &tok->src;
    r.model = "random";
  }
  const auto sources = decode_sources(cfg.data.test_src, *src_tok, opt.decode_sentences, model->config().max_len - 2);
  if (sources.empty()) throw std::invalid_argument("bench: no sentence to decode in " + cfg.data.test_src);
  r.sentences = static_cast<std::int64_t>(sources.size());
  r.batch = opt.decode_batch > 0 ? opt.decode_batch : kSentencesPerBatch;
  fs::create_directories(cfg.run.dir);
  write_sources(fs::path(cfg.run.dir) / kDecodeSourcesFile, sources);

  DecodeOptions o;
  o.use_cache = true;
  o.beam = 1;
  r.greedy_cache = time_decoding(*model, sources, o, r.batch);
  o.beam = kDecodeBeam;
  r.beam_cache = time_decoding(*model, sources, o, r.batch);
  o.use_cache = false;
  o.beam = 1;
  r.greedy_nocache = time_decoding(*model, sources, o, r.batch);
  o.beam = kDecodeBeam;
  r.beam_nocache = time_decoding(*model, sources, o, r.batch);
  if (bf16_rows && bf16_unit() != Bf16Unit::None) {  // translate --precision bf16: the cached rows again
    const MatmulPrecisionScope bf16(MatmulPrecision::Bf16);
    r.bf16 = true;
    o.use_cache = true;
    o.beam = 1;
    r.bf16_greedy_cache = time_decoding(*model, sources, o, r.batch);
    o.beam = kDecodeBeam;
    r.bf16_beam_cache = time_decoding(*model, sources, o, r.batch);
  }
  return r;
}

nlohmann::ordered_json sentences_per_s(const DecodeReport& dec, const DecodeTiming& t) {
  return dec.sentences > 0 ? rounded(t.sentences_per_s(), 2) : nullptr;
}

namespace {

// "  label                       sent/s    tokens/s    tokens  prefill ms   decode ms"
// (the prefill and decode columns on the KV-cache rows, where decoding has the two phases)
void print_decode_row(std::ostream& os, const std::string& label, const DecodeTiming& t, bool phases) {
  os << "  " << std::left << std::setw(24) << label << std::right << std::setw(10) << fixed(t.sentences_per_s(), 2)
     << std::setw(12) << fixed(t.tokens_per_s(), 1) << std::setw(10) << t.tokens;
  if (phases) os << std::setw(12) << fixed(t.prefill_seconds * 1e3, 1) << std::setw(12) << fixed(t.decode_seconds() * 1e3, 1);
  os << "\n";
}

}  // namespace

void print_decoding(std::ostream& os, const Config& cfg, const DecodeReport& dec, const std::string& cache_name) {
  if (dec.sentences <= 0) return;
  const std::int64_t batches = (dec.sentences + dec.batch - 1) / dec.batch;
  const std::int64_t side_by_side = std::min<std::int64_t>(num_threads(), batches);
  os << "\ndecoding " << dec.sentences << " sentences of " << cfg.data.test_src << " (" << dec.model << " model), "
     << batches << (batches == 1 ? " batch" : " batches") << " of up to " << dec.batch << " sentences";
  if (side_by_side > 1) os << ", " << side_by_side << " side by side (one thread each)\n";
  else os << " on " << num_threads() << (num_threads() == 1 ? " thread\n" : " threads\n");
  os << "  " << std::left << std::setw(24) << "" << std::right << std::setw(10) << "sent/s" << std::setw(12)
     << "tokens/s" << std::setw(10) << "tokens" << std::setw(12) << "prefill ms" << std::setw(12) << "decode ms" << "\n";
  print_decode_row(os, "greedy, " + cache_name, dec.greedy_cache, true);
  print_decode_row(os, "greedy, no cache", dec.greedy_nocache, false);
  print_decode_row(os, "beam 4, " + cache_name, dec.beam_cache, true);
  print_decode_row(os, "beam 4, no cache", dec.beam_nocache, false);
  if (dec.bf16) {
    print_decode_row(os, "greedy, " + cache_name + ", bf16", dec.bf16_greedy_cache, true);
    print_decode_row(os, "beam 4, " + cache_name + ", bf16", dec.bf16_beam_cache, true);
  }
}

}  // namespace sf::train::bench_util
