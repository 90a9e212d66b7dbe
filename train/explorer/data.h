// The explorer's data (`scratchformer serve`, `scratchformer report`): what each page shows, as
// JSON, computed by the code the command-line tools already use (decoding in train/eval, the
// trace hooks in train/classroom/trace.h, the attention maps behind `scratchformer attention`,
// the schedule and positional tables behind `scratchformer plot`). Nothing here knows about
// HTTP: train/explorer/api.h turns requests into calls of these functions, so they can be
// tested, fuzzed and put in a report file without a server.
//
// Every function throws std::invalid_argument with a one-line message for a bad input (the
// server answers 400 with it) and std::runtime_error for a file that cannot be read (500).
// The model functions are not thread-safe: the caller holds the model's lock (api.h).
//
// Letters: S source length, T target length, L layers, H heads, V vocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "train/setup.h"

namespace sf::explorer {

using Json = nlohmann::json;

// ---- runs: files a training writes ---------------------------------------------------------

// One run directory (config.toml, metrics.tsv, checkpoints): {name, arch, task, config,
// checkpoints, has_metrics, metrics_rows, modified}.
Json run_summary(const std::string& run_dir, const std::string& name);

// A tab-separated file with a header (metrics.tsv, layer_norms.tsv) from data row `since` on:
// {columns, rows, total}; empty cells are null, the kind column stays a string.
Json tsv_rows(const std::string& path, std::int64_t since);

// snapshots.jsonl (the trainer's attention snapshots at validation): {snapshots: [...]}.
Json snapshots(const std::string& path);

// ---- a trained model -----------------------------------------------------------------------

struct TranslateRequest {
  std::string text;
  std::string mode = "greedy";  // "greedy" | "beam" (translation) | "sample" (decoder-only lm generation)
  std::int64_t beam = 4;        // mode beam: 1..16; 0 = the config's train.valid_beam
  double length_penalty = -1;   // beam's alpha; < 0 = the config's train.valid_length_penalty (translate's default)
  double temperature = 1.0;     // mode sample only (greedy is temperature 0)
  std::int64_t top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;       // the sampling generator's seed, as `generate --seed`
  std::int64_t max_new = 50;    // decoder-only lm: tokens generated at most
};

// {arch, mode, source_pieces, text, tokens: [{piece, id, prob, top: [{piece, id, prob}] x5}],
//  candidates: [{text, score, log_prob, length}], seconds}. `text` is what `scratchformer
// translate` prints for the same sentence and options (a translation model, encoder-decoder or
// decoder-only), or what `scratchformer generate` prints (a decoder-only lm: the prompt and its
// continuation). tokens: the output tokens (and </s> when the decoder ended with it), each with
// its probability and the five likeliest tokens, from one teacher-forced forward over the output
// (softmax over the whole vocabulary). candidates: ONE entry, the output itself (beam_search
// returns only its best hypothesis); log_prob sums the tokens' log probabilities, score is
// log_prob / length^alpha for beam, log_prob otherwise. An encoder-only model throws
// std::invalid_argument("this model does not generate: ...").
Json translate(const train::InferenceModel& im, const TranslateRequest& req);

// {arch, translation, teacher_forced, stacks: [{kind, causal, layers, heads, queries, keys,
//  weights [L][H][Tq][Tk], masked [Tq][Tk]}]}: the maps `scratchformer attention` draws. kinds:
// encoder-decoder "encoder", "decoder_self" (causal), "cross"; one stack "self" (causal for a
// decoder-only model). Weights rounded to 4 decimals; masked = the causal mask's blocked cells
// (one sentence has no padding). `target` (encoder-decoder only) is fed instead of the greedy
// translation (teacher forcing). An rnn model throws std::invalid_argument("attention: needs a
// Transformer ..., got arch rnn") (its maps are per layer and head).
Json attention(const train::InferenceModel& im, const std::string& text, const std::optional<std::string>& target);

// Attention beside attribution for one sentence of an encoder-decoder Transformer
// (train/classroom/attribution.h), the target given or the greedy translation: {source, target
// (pieces, ending "</s>"), translation, teacher_forced, methods: [{key, values [T][S]}] (keys
// attention_mean, rollout, gradient_input, integrated), heads: [{layer, head, weights [T][S],
// drop [T]}] (decoder cross-attention; drop = log p(y_t) lost when the head is zeroed),
// log_prob [T], integrated_gap [T]}. Other models: std::invalid_argument.
Json attribution(const train::InferenceModel& im, const std::string& text, const std::optional<std::string>& target);

// ---- one training step ---------------------------------------------------------------------

struct StepRequest {
  train::Config config;                 // with the request's overrides applied
  std::string checkpoint;               // "" = the model's initial weights (the trainer's, from train.seed)
  std::int64_t batch = 0;               // which batch of epoch 0
  std::uint64_t seed = 0;               // 0 = the trainer's dropout stream; else the dropout masks' seed
  std::int64_t detail_values = 8;       // first rows x columns of values kept per tensor, 0..16
};

// One batch through forward and backward under a ModuleTrace with gradients: {config, loss,
// batch: {index, of, rows, src_len, tgt_len, tokens}, checkpoint, modules, gradients,
// parameters}, each entry {path, type, depth, shape, stats: {mean, std, min, max, nan, inf},
// histogram: {min, max, counts[20]}, values}. The batch is the trainer's (its tokenizers, split,
// Batcher, TaskBatches) and so is the model in training mode: with checkpoint "" and seed 0 the
// loss is the trainer's step 1. Tokenizers missing from run.dir are trained into the cache
// outside the project (train/setup.h tokenizer_cache_dir). The split's "train: kept ..." line
// goes to stdout, as the trainer's.
Json step(const StepRequest& req);

}  // namespace sf::explorer
