// Timing shared by the bench modes that train and decode a model (bench.cpp's reference
// Transformer, rnn_bench.cpp's recurrent model): the trainer's step on one random batch, the
// process's memory, and decoding test sentences greedy and with beam 4, with and without the
// cache (the KV cache of a Transformer, the recurrent state of an rnn).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "train/bench/bench.h"
#include "train/config.h"
#include "train/optim/optim.h"

namespace sf::train::bench_util {

// ---- the machine ---------------------------------------------------------------------------

// Resident memory now, in MiB (/proc/self/statm: pages).
double rss_now_mib();
// The process's peak resident memory so far, in MiB (ru_maxrss is in KiB on Linux).
double peak_rss_mib();

// ---- training ------------------------------------------------------------------------------

// The optimizer train.optimizer names, over `params`.
std::unique_ptr<Optimizer> make_optimizer(const TrainSection& t, NamedParameters params);

struct StepTiming {
  double median_s = 0, min_s = 0, max_s = 0;
  double loss = NAN;  // of the last step
  std::int64_t params = 0;
};

// The step's fields of a JSON line: step_ms, step_ms_min, step_ms_max, loss.
void add_step_fields(nlohmann::ordered_json& j, const StepTiming& step);

// warmup + steps training steps of a fresh model of the config's shape on one random batch
// (opt.batch pairs of opt.length tokens).
StepTiming time_training(const Config& cfg, const nn::ModelConfig& mcfg, const BenchOptions& opt);

// ---- decoding ------------------------------------------------------------------------------

struct DecodeTiming {
  double seconds = 0;
  double prefill_seconds = 0;  // of `seconds`: the prefills (the encoder over each batch's sources)
  double decode_seconds() const { return seconds - prefill_seconds; }  // the steps, one token each
  std::int64_t sentences = 0, tokens = 0;  // tokens generated, EOS not counted
  double sentences_per_s() const { return seconds > 0 ? static_cast<double>(sentences) / seconds : NAN; }
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : NAN; }
};

struct DecodeReport {
  std::string model = "none";  // "random", "checkpoint" or "none" (skipped)
  std::int64_t sentences = 0;
  std::int64_t batch = 0;  // sentences per batch
  DecodeTiming greedy_cache, greedy_nocache, beam_cache, beam_nocache;
  bool bf16 = false;                    // the CPU has bf16 units: the cached rows again in bf16
  DecodeTiming bf16_greedy_cache, bf16_beam_cache;
};

// Decodes the first opt.decode_sentences sentences of data.test_src (an encoder-decoder or rnn
// config; anything else, or decode_sentences 0: nothing decoded, model "none") greedy and with
// beam 4, with and without the cache, with opt.checkpoint's model or a random one of the config's
// shape; the source ids go to <run.dir>/bench-decode-sources.txt for tools/bench_pytorch.py.
// bf16_rows: the cached rows again under bf16 matrix products, where the CPU has the units.
DecodeReport run_decoding(const Config& cfg, const BenchOptions& opt, bool bf16_rows = true);

// A decoding rate for the JSON line, or null when nothing was decoded.
nlohmann::ordered_json sentences_per_s(const DecodeReport& dec, const DecodeTiming& t);

// The decoding table: greedy and beam, with and without the cache (nothing if nothing was
// decoded). cache_name: what the cache is ("KV cache", "state").
void print_decoding(std::ostream& os, const Config& cfg, const DecodeReport& dec, const std::string& cache_name = "KV cache");

}  // namespace sf::train::bench_util
