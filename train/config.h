// The run configuration: a TOML file with four sections, parsed once into the typed structs below.
//
//   [model]  the network's shape       [data]  corpora, tokenizer, batching
//   [train]  optimizer, schedule, loop [run]   output directory, threads, checkpoints
//
// Every key is optional (the default is the value written after `=` below) except data.train_src,
// data.train_tgt, data.valid_src, data.valid_tgt and run.dir. Any key can be overridden from the
// command line with `--set section.key=value`; the value is read as TOML, so `train.lr=0.5`,
// `model.share_embeddings=false` and `model.norm="rmsnorm"` work, and for a key that holds a
// string the quotes may be left out (`model.norm=rmsnorm`, `run.dir=runs/try2`).
//
// Paths (data.*_src, data.*_tgt, run.dir) are relative to the directory of the config file, not to
// the current directory, and are stored resolved to absolute paths; a path given with --set is
// treated exactly as if it were written in the file. So `scratchformer train --config
// configs/quickstart.toml` finds its corpora wherever it is started from.
//
// Mistakes are errors, never silently ignored: an unknown section or key (with the closest known
// key suggested), a value of the wrong type, an out-of-range size, an enum value not in its list,
// a missing required key or a TOML syntax error all throw ConfigError with one line naming the
// file, the line when known, the key, and what was expected, e.g.
//   quickstart.toml:3: model.d_model: expected an integer, got a string
//   quickstart.toml:4: model.n_heads: d_model 250 is not divisible by n_heads 8
//   quickstart.toml:7: unknown key model.d_modle (did you mean model.d_model?)
// A key that only one architecture reads (model.rnn_cell, model.rnn_attention: arch rnn) is an
// error in a config of any other, even at its default value; to_toml writes it only for that one.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace sf::train {

// A bad config file or --set override; what() is one line that names the file and the key.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// [model]: the network: an encoder-decoder, decoder-only or encoder-only Transformer, or the
// recurrent encoder-decoder (arch rnn).
struct ModelSection {
  std::string arch = "encoder-decoder";  // the architecture (nn/model.h): "encoder-decoder" (a
                                         // bidirectional encoder, a causal decoder cross-attending to
                                         // it; translation) | "decoder-only" (one causal stack of
                                         // decoder_layers; lm, prompted translation) | "encoder-only"
                                         // (one bidirectional stack of encoder_layers; mlm, classify) |
                                         // "rnn" (the recurrent encoder-decoder before the Transformer;
                                         // translation; reads d_model, encoder_layers, decoder_layers,
                                         // dropout, max_len and the rnn_* keys, ignores the rest)
  std::int64_t d_model = 256;          // model width D (embedding and residual stream), e.g. 256 or 512
  std::int64_t n_heads = 4;            // attention heads H; D must be divisible by H (head width D/H), e.g. 8
  std::int64_t n_kv_heads = 0;         // key/value heads for grouped-query attention; 0 = n_heads (plain
                                       // multi-head), 1 = multi-query; must divide n_heads, e.g. 2
  std::int64_t d_ff = 1024;            // hidden width of the feed-forward block, typically 4 * d_model
  std::int64_t encoder_layers = 3;     // encoder layers, e.g. 6 in the original Transformer
  std::int64_t decoder_layers = 3;     // decoder layers, e.g. 6
  double dropout = 0.1;                // dropout on embeddings, sublayer outputs and FFN hidden, in [0, 1)
  double attention_dropout = 0.0;      // dropout on the attention weights, in [0, 1), usually 0 or 0.1
  std::string activation = "relu";     // feed-forward activation: "relu" | "gelu" | "swiglu"
  std::string norm = "layernorm";      // normalisation: "layernorm" | "rmsnorm"
  std::string norm_position = "pre";   // "pre" (norm before each sublayer, stable) | "post" (2017 paper)
  std::string positional = "sinusoidal";  // positions: "sinusoidal" | "learned" | "rope" | "alibi" | "none"
                                          // (none: the model sees no order at all; `demo permutation`)
  std::string attention = "plain";    // how attention is computed: "plain" (scores, softmax, weights v as
                                       // separate ops; (B,H,T,T) weights kept for backward) | "tiled" (the
                                       // online-softmax op, O(T) memory; needs attention_dropout = 0).
                                       // Same parameters and outputs: a checkpoint runs under either
  std::int64_t attention_window = 0;   // sliding-window self-attention: a query at position p reads keys j
                                       // with |p - j| < W only (a causal layer: the W keys p-W+1..p); 0 =
                                       // full attention. Cross-attention is never windowed. Decoding keeps
                                       // a KV cache of W positions (a ring buffer), e.g. 64; <= max_len
  std::string rope_scaling = "none";   // positional = rope only: stretch RoPE past the trained length,
                                       // "none" | "interpolation" (positions divided by rope_factor) |
                                       // "ntk" (the base 10000 raised by rope_factor^(Dh/(Dh-2)))
  double rope_factor = 1.0;            // how much longer than trained, >= 1 (1 with rope_scaling none), e.g. 4
  bool share_embeddings = true;        // one embedding table for source and target (needs a joint tokenizer)
  bool tie_output = true;              // output projection reuses the target embedding matrix
  std::int64_t max_len = 256;          // longest sequence in tokens (size of learned/sinusoidal tables)
  std::string pooling = "mean";        // encoder-only classification: the sentence vector is "mean" (the
                                       // average over non-padding tokens) | "cls" (the first token, <cls>)
  std::string rnn_cell = "lstm";       // arch rnn only: the recurrent cell of encoder and decoder, "lstm" |
                                       // "gru" | "rnn" (Elman: h = tanh(W x + U h), no gates)
  std::string rnn_attention = "additive";  // arch rnn only: how the decoder looks at the source, "none" (the
                                           // last state only: the fixed-vector bottleneck) | "additive"
                                           // (Bahdanau) | "dot" | "general" (Luong)

  bool operator==(const ModelSection&) const = default;
};

// [data]: corpora, tokenizer and batching. Paths are absolute once loaded (see the top of the file).
struct DataSection {
  std::string task = "translation";    // what is learned (train/task.h): "translation" (src -> tgt; an
                                       // encoder-decoder, or a decoder-only model reading <s> src <sep>) |
                                       // "lm" (next token, decoder-only) | "mlm" (masked tokens, BERT's
                                       // recipe, encoder-only) | "classify" (a label per line, encoder-only)
  // translation reads the four paired files below; lm, mlm and classify read train_file,
  // valid_file (and test_file), one example per line
  std::string train_src;               // translation, required: training source sentences, e.g. "train.de"
  std::string train_tgt;               // translation, required: training target sentences, aligned with train_src
  std::string valid_src;               // translation, required: validation source sentences
  std::string valid_tgt;               // translation, required: validation target (reference) sentences
  std::string test_src;                // optional test source ("" = no test set)
  std::string test_tgt;                // optional test reference ("" = no test set)
  std::string train_file;              // lm, mlm, classify, required: one sentence per line (lm, mlm) or
                                       // label<TAB>text or label<TAB>text_a<TAB>text_b (classify)
  std::string valid_file;              // lm, mlm, classify, required: the held-out lines, same form
  std::string test_file;               // lm, mlm, classify, optional ("" = no test set)
  std::string labels;                  // classify, required: the class names in order, comma-separated,
                                       // e.g. "mismatch,match" (class 0, class 1)
  std::int64_t tokenizer_vocab_size = 8000;  // SentencePiece vocabulary size, e.g. 8000 for Multi30k
  std::string tokenizer_type = "unigram";    // SentencePiece model: "unigram" | "bpe"
  bool joint_tokenizer = true;         // one tokenizer trained on both languages (else one per side)
  std::int64_t max_tokens = 100;       // training pairs with a side longer than this (in tokens) are dropped
  std::int64_t batch_tokens = 4096;    // tokens per batch (source + target, padding included), e.g. 4096
  std::string bleu_tokenize = "13a";   // sacreBLEU tokenizer for validation BLEU: "13a" | "zh"
  std::int64_t max_valid_sentences = 0;  // validate on the first N sentences only; 0 = all of them

  bool operator==(const DataSection&) const = default;
};

// [train]: optimizer, learning-rate schedule, regularisation and the training loop.
struct TrainSection {
  std::int64_t seed = 1;               // seeds parameter init, dropout and batch shuffling (>= 0)
  std::string optimizer = "adam";      // "adam" | "adamw" (decoupled weight decay) | "sgd"
  double lr = 1.0;                     // learning rate; for the noam schedule a multiplier of
                                       // d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), e.g. 1.0-2.0;
                                       // for cosine/constant the peak rate itself, e.g. 5e-4
  double beta1 = 0.9;                  // Adam first-moment decay, in [0, 1)
  double beta2 = 0.98;                 // Adam second-moment decay, in [0, 1); 0.98 as in the 2017 paper
  double eps = 1e-9;                   // Adam denominator epsilon, > 0
  double weight_decay = 0.0;           // L2 (adam, sgd) or decoupled (adamw) weight decay, e.g. 0.01
  double momentum = 0.0;               // SGD momentum, in [0, 1), e.g. 0.9
  std::string schedule = "noam";       // learning-rate schedule: "noam" | "cosine" | "constant"
  std::int64_t warmup_steps = 4000;    // linear warm-up steps (> 0 for noam), e.g. 4000
  std::int64_t max_steps = 100000;     // stop after this many optimizer steps (cosine decays to min_lr here)
  std::int64_t max_epochs = 0;         // stop after this many passes over the data; 0 = no limit
  double max_minutes = 0;              // stop once this much training time (validations included) has passed (a resumed run
                                       // counts its earlier sessions); 0 = no limit. For comparing
                                       // models at the same wall time; the schedule still runs to max_steps
  double label_smoothing = 0.1;        // probability mass spread over the vocabulary, in [0, 1), e.g. 0.1
  double clip_norm = 1.0;              // clip the global gradient L2 norm to this; 0 = no clipping
  std::int64_t accum_steps = 1;        // batches whose gradients are summed per optimizer step, >= 1
  std::int64_t log_every = 100;        // steps between training-loss lines in metrics.tsv
  std::int64_t valid_every = 1000;     // steps between validations (loss and BLEU)
  std::int64_t patience = 0;           // stop after this many validations without improvement; 0 = off
  std::string best_metric = "bleu";    // what checkpoint-best.safetensors keeps the best of: "bleu" (translation)
                                       // | "loss" (the unsmoothed NLL, minimised) | "accuracy" (mlm, classify)
  std::int64_t valid_beam = 1;         // beam size for validation BLEU; 1 = greedy (fastest)
  double valid_length_penalty = 1.0;   // beam search's alpha (score / length^alpha) for validation, and
                                       // the default of translate and eval; `scratchformer tune-beam`
                                       // picks it on the valid set and records it here, in [0, 5]
  std::int64_t max_nonfinite = 5;      // consecutive steps with a NaN/inf loss skipped before giving up
  double min_lr = 0.0;                 // floor of the learning rate (end of the cosine schedule), >= 0
  std::string precision = "float32";   // matrix products: "float32" | "bf16" (inputs rounded to bf16, sums in
                                       // float32, on the CPU's AMX or AVX512-BF16 units; weights, Adam, norms,
                                       // softmax and the loss stay float32: autograd/runtime/bf16.h)

  bool operator==(const TrainSection&) const = default;
};

// [run]: where results go and how the machine is used.
struct RunSection {
  std::string dir;                     // required: run directory (config.toml, spm.model, checkpoints,
                                       // metrics.tsv), e.g. "runs/quickstart"; absolute once loaded
  std::int64_t threads = 0;            // kernel and BLAS threads; 0 = all usable cores (threads.h)
  std::int64_t keep_checkpoints = 1;   // recent checkpoints kept, K >= 1: checkpoint-last (the newest, the
                                       // resume point) and the K - 1 before it as
                                       // checkpoint-step-NNNNNN.safetensors; 1 = only checkpoint-last
                                       // (checkpoint-best is always kept besides these), e.g. 3
  bool attention_snapshots = false;    // at every validation, append the attention of the first valid
                                       // sentence to snapshots.jsonl (the explorer's "Over training"
                                       // page, train/explorer/snapshots.h); Transformer translation
                                       // models (an error with arch rnn)
  std::int64_t average_last = 0;       // at the end of training, average the weights of the last K kept
                                       // checkpoints (needs keep_checkpoints >= K) into
                                       // checkpoint-average.safetensors and test with it instead of
                                       // checkpoint-best (train/checkpoint/checkpoint_average.h); 0 = off, e.g. 3

  bool operator==(const RunSection&) const = default;
};

struct Config {
  ModelSection model;
  DataSection data;
  TrainSection train;
  RunSection run;
  std::string source_path;  // the config file this was loaded from, as given (not a setting)
  std::vector<std::string> missing_files;  // data files found nowhere, one line each (not a setting)

  // Equal settings; source_path is where they came from, not a setting, and is not compared.
  bool operator==(const Config& other) const {
    return model == other.model && data == other.data && train == other.train && run == other.run;
  }
};

// data.labels split at the commas, trimmed: the class names, class i the i-th ({} when unset).
std::vector<std::string> class_labels(const DataSection& data);

// Reads the TOML file at `path`, applies `overrides` ("section.key=value", as given to --set, in
// order, later ones winning), checks every key and value, and resolves the paths. Throws
// ConfigError for a missing file, a syntax error, an unknown section or key, a wrong type, a value
// out of range, a missing required key or a malformed override.
// `path` may also be a config's bare name (`quickstart`), found in the data folder's configs/
// (train/data_folder.h). A data file that is not beside the config is looked for in the data
// folder; one found in neither place is listed in missing_files (not an error here: a config may
// be loaded only to read its model); require_data_files throws ConfigError with the first.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
void require_data_files(const Config& config);

// The effective config as TOML: every key of every section (model.rnn_* only for arch rnn, where
// another arch refuses them), paths absolute. load_config on the result gives back an equal
// Config; it is what the run directory's config.toml holds.
std::string to_toml(const Config& config);

// Levenshtein distance: insertions, deletions and substitutions needed to turn a into b.
std::size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `name` if it is within 2 edits (a typo or a swapped pair, not a
// different word), else "": the "did you mean" of a config key or a command-line option.
std::string closest(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace sf::train
