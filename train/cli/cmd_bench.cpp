// `scratchformer bench --config FILE`: the training-step and decoding speed of a reference model
// next to the BLAS floor of its matrix products; with --scaling, step time, FLOPs and memory per
// sequence length instead (train/bench/bench.h says what is measured and how); with
// --generation, a decoder-only model's prefill against its decode steps per prompt length: time,
// FLOPs, bytes read, arithmetic intensity, KV-cache bytes (train/bench/generation_bench.h); on an
// rnn config, its own table (train/bench/rnn_bench.h): the step against length beside a Transformer;
// `scratchformer bench --attention` (no config): the attention kernel ladder's time and memory
// against T (train/bench/attention_bench.h).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/bench/attention_bench.h"
#include "train/bench/bench.h"
#include "train/bench/generation_bench.h"
#include "train/bench/rnn_bench.h"
#include "train/eval/evaluate.h"
#include "train/cli/commands.h"
#include "train/config.h"

namespace sf::cli {

namespace {

struct BenchArgs {
  std::string config;
  std::vector<std::string> overrides;  // --set section.key=value
  train::BenchOptions options;
  bool attention = false;              // --attention: the kernel ladder's table (no config)
  train::AttentionBenchOptions attention_options;
};

int run_bench(BenchArgs& a, const CLI::App& cmd) {
  if (a.attention) {
    if (a.options.scaling || a.options.generation || !a.config.empty())
      throw std::invalid_argument("bench --attention: it measures the attention kernels alone; pass no --config, "
                                  "--scaling or --generation with it");
    if (cmd.count("--steps") > 0) a.attention_options.steps = a.options.steps;
    a.attention_options.json_only = a.options.json_only;
    return train::run_attention_bench(a.attention_options, a.options.threads);
  }
  if (a.config.empty())
    throw std::invalid_argument("bench: --config is required (e.g. configs/bench.toml), except with --attention");
  if (a.options.scaling && a.options.generation)
    throw std::invalid_argument("bench: --scaling and --generation print different tables; pass one of them");
  const train::Config cfg = train::load_config(a.config, a.overrides);
  train::require_data_files(cfg);  // a corpus found neither beside the config nor in the data folder
  if (cfg.model.arch == "rnn") {
    // the recurrent model's benchmark has its length table built in (train/bench/rnn_bench.h)
    if (a.options.scaling || a.options.generation)
      throw std::invalid_argument(std::string("bench: ") + (a.options.scaling ? "--scaling" : "--generation") +
                                  " is for a Transformer; an rnn config's length table is part of plain bench (" +
                                  a.config + ")");
    return train::run_rnn_bench(cfg, a.options);
  }
  if (a.options.generation) return train::run_generation_bench(cfg, a.options);
  if (a.options.scaling) {
    // --scaling has defaults of its own for the options not given
    if (cmd.count("--steps") == 0) a.options.steps = train::kScalingSteps;
    if (cmd.count("--warmup") == 0) a.options.warmup = train::kScalingWarmup;
    return train::run_scaling_bench(cfg, a.options);
  }
  return train::run_bench(cfg, a.options);
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  train::BenchOptions& o = a->options;
  CLI::App* cmd = app.add_subcommand("bench", "Training-step and decoding speed of a reference model next to BLAS (configs/bench.toml); an rnn config (configs/bench-rnn.toml): its step against length beside a Transformer's");
  cmd->add_option("--config", a->config, "Config file (TOML), e.g. configs/bench.toml (not with --attention)");
  cmd->add_option("--set", a->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--steps", o.steps, "Timed training steps, the median is reported (default: 20)");
  cmd->add_option("--warmup", o.warmup, "Untimed training steps first (default: 3)");
  cmd->add_option("--threads", o.threads, "Threads (default: the config's run.threads; 0 there = all usable cores)");
  cmd->add_option("--decode-sentences", o.decode_sentences, "Test sentences decoded per setting, 0 = no decoding (default: 64)");
  cmd->add_option("--decode-batch", o.decode_batch,
                  "Sentences per decoding batch, batches side by side one per thread (default: translate's, " +
                      std::to_string(train::kSentencesPerBatch) + ")");
  cmd->add_option("--checkpoint", o.checkpoint, "Decode with this trained model (default: a random one)");
  cmd->add_flag("--json", o.json_only, "Print only the JSON line");
  cmd->add_flag("--scaling", o.scaling,
                "Instead: step time, FLOPs and peak tensor memory at T = 16..256 (fixed token budget), plain vs "
                "tiled attention (default --steps 3 --warmup 1)");
  cmd->add_flag("--attention", a->attention,
                "Instead: the attention kernel ladder (autograd/ladder) at T = 64..8192, causal, H 4, Dh 64: time of "
                "a forward + backward and the extra memory at its peak, every rung (default --steps 3)");
  cmd->add_option("--window", a->attention_options.window, "--attention: the window W of rung 4 and of the window mask (default: 256)");
  cmd->add_option("--lengths", a->attention_options.lengths, "--attention: the sequence lengths T (default: 64 128 ... 8192)")
      ->delimiter(',');
  cmd->add_option("--svg", a->attention_options.svg, "--attention: also draw time and memory against T into this SVG file");
  cmd->add_flag("--generation", o.generation,
                "Instead: a decoder-only model's prefill (median of --steps) against 32 decode steps at prompt "
                "lengths 16..256, batch 1 and 8: ms, GFLOP/s, bytes per step, FLOP/byte, KV-cache bytes");
  return {cmd, [a, cmd] { return run_bench(*a, *cmd); }};
}

}  // namespace sf::cli
