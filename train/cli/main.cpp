// scratchformer: the command-line program.
//
//   train      train a translation model from a config file
//   translate  translate sentences with a trained checkpoint
//   eval       BLEU, loss and perplexity of a checkpoint on a parallel test set
//   bleu       sacreBLEU-compatible corpus BLEU of hypotheses against references
//   summary    the model of a config: module tree, parameter counts, FLOPs, KV-cache bytes
//   demo       a tiny forward and backward pass, printed step by step
//
// For the classroom and the debugger:
//   gradcheck      float64 gradient checks of every op and module, as a table (exit 1 on a failure)
//   attention      cross- and self-attention heatmaps of one sentence, per layer and head (SVG)
//   plot           training curves of a run, or a config's positional encodings / LR schedule (SVG)
//   explain-batch  one real training batch as text: tokens, teacher forcing, masks, counts
//
// Bad input (command line, config, corpus, checkpoint) prints one line to stderr and exits 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "data/corpus.h"
#include "train/bench/bench.h"
#include "train/eval/bleu.h"
#include "train/classroom/classroom.h"
#include "train/config.h"
#include "train/distributed/distributed.h"
#include "train/eval/evaluate.h"
#include "train/classroom/gradcheck_suite.h"
#include "train/classroom/plots.h"
#include "train/setup.h"
#include "train/classroom/summary.h"
#include "train/classroom/trace.h"
#include "train/trainer.h"

namespace {

namespace fs = std::filesystem;
using namespace sf;

// y = sum(relu(x @ w)) on a tiny input, printed step by step.
int run_demo() {
  Generator gen(0);
  Tensor x = randn({2, 3}, gen);                   // (B=2, D=3)
  Tensor w = randn({3, 4}, gen).requires_grad_();  // (D=3, F=4)
  w.set_name("w");
  Tensor h = matmul(x, w);   // (2, 4)
  Tensor y = sum(relu(h));   // ()
  std::cout << "x = " << x << "\n\nw = " << w << "\n\nh = x @ w = " << h << "\n\ny = sum(relu(h)) = " << y << "\n\n";
  y.backward();
  std::cout << "dy/dw = " << w.grad() << "\n";
  return 0;
}

// Reads all lines of a file or of stdin ("-" or empty path) as they are, without their "\n" or
// "\r\n": a line that is not UTF-8 is reported by encode_inputs and gets an empty translation, so
// the output always has one line per input line (the same from a file and from stdin).
std::vector<std::string> read_input_lines(const std::string& path) {
  std::ifstream file;
  if (!path.empty() && path != "-") {
    if (!fs::exists(path)) throw std::invalid_argument("input file not found: " + path);
    if (fs::is_directory(path)) throw std::invalid_argument("input " + path + " is a directory, expected a text file");
    file.open(path, std::ios::binary);
    if (!file) throw std::runtime_error("cannot open the input file " + path);
  }
  std::istream& in = file.is_open() ? file : std::cin;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  if (!lines.empty() && lines[0].rfind("\xEF\xBB\xBF", 0) == 0) lines[0].erase(0, 3);  // a byte-order mark
  return lines;
}

// A whole number >= 1 for options like --beam and --trace-steps (CLI::PositiveNumber would say
// "not in range 0 to 1.797...e308"). `what` names it in the message: "a beam size".
CLI::Validator at_least_one(const std::string& what) {
  return CLI::Validator(
      [what](std::string& value) -> std::string {
        long long n = 0;
        std::size_t used = 0;
        try {
          n = std::stoll(value, &used);
        } catch (const std::exception&) {
        }
        if (used != value.size() || n < 1) return "expected " + what + " of at least 1, got '" + value + "'";
        return "";
      },
      "");
}
CLI::Validator beam_size_check() { return at_least_one("a beam size"); }

struct TranslateArgs {
  std::string checkpoint, input;
  std::int64_t beam = 0;  // 0 = the config's valid_beam
  double length_penalty = 1.0;
  bool trace = false;            // translate --trace: module statistics for the first sentence
  std::int64_t trace_steps = 1;  // decoding steps traced
  std::string trace_file;        // "" = stderr
};

// The first non-empty input sentence through encoder and trace_steps decoding steps, under a
// trace (train/classroom/trace.h), written to --trace-file or stderr.
void trace_first_sentence(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                          const TranslateArgs& a) {
  const auto first = std::find_if(ids.begin(), ids.end(), [](const auto& v) { return !v.empty(); });
  if (first == ids.end()) throw std::invalid_argument("translate --trace: no non-empty input sentence to trace");
  std::ofstream file;
  if (!a.trace_file.empty()) {
    file.open(a.trace_file, std::ios::trunc);
    if (!file) throw std::runtime_error("--trace-file: cannot open " + a.trace_file + " for writing");
  }
  train::trace_translation(*im.model, *first, a.trace_steps, file.is_open() ? static_cast<std::ostream&>(file) : std::cerr);
}

// Encodes input lines for the model: invalid UTF-8 and over-long lines are reported on stderr
// (the line is skipped or truncated), never a crash. Empty lines translate to empty lines.
std::vector<std::vector<std::int64_t>> encode_inputs(const std::vector<std::string>& lines, const train::Tokenizers& tok,
                                                     std::int64_t max_len, const std::string& origin) {
  std::vector<std::vector<std::int64_t>> ids(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::size_t bad = 0;
    if (!data::valid_utf8(lines[i], &bad)) {
      std::cerr << "scratchformer: warning: " << origin << " line " << i + 1 << ": invalid UTF-8 at byte " << bad + 1
                << "; writing an empty translation\n";
      continue;
    }
    // Only the start of a huge line can fit the model: tokenise no more than max_len tokens can
    // take (data::kMaxBytesPerToken; a 10 MB line would take GBs to tokenise), cut at a character.
    std::string_view text = lines[i];
    const std::size_t max_bytes = static_cast<std::size_t>(max_len) * data::kMaxBytesPerToken;
    if (text.size() > max_bytes) {
      std::size_t cut = max_bytes;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
      text = text.substr(0, cut);
    }
    ids[i] = tok.src.encode(std::string(text));
    if (static_cast<std::int64_t>(ids[i].size()) > max_len || text.size() < lines[i].size()) {
      std::cerr << "scratchformer: warning: " << origin << " line " << i + 1 << ": "
                << (text.size() < lines[i].size() ? "over " : "") << ids[i].size()
                << " tokens, truncated to the model's limit of " << max_len << "\n";
      ids[i].resize(std::min(ids[i].size(), static_cast<std::size_t>(max_len)));
    }
  }
  return ids;
}

// Translates non-empty inputs; empty ones stay empty. Output order = input order.
std::vector<std::string> translate_lines(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                                         const train::DecodeOptions& opt) {
  std::vector<std::vector<std::int64_t>> nonempty;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!ids[i].empty()) nonempty.push_back(ids[i]), where.push_back(i);
  std::vector<std::string> out(ids.size());
  const auto hyps = train::translate_all(*im.model, *im.tokenizers, nonempty, opt);
  for (std::size_t k = 0; k < where.size(); ++k) out[where[k]] = hyps[k];
  return out;
}

train::DecodeOptions decode_options(const train::InferenceModel& im, const TranslateArgs& a) {
  train::DecodeOptions opt;
  opt.beam = a.beam > 0 ? a.beam : im.config.train.valid_beam;
  opt.length_penalty = a.length_penalty;
  return opt;
}

int run_translate(const TranslateArgs& a) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  const auto lines = read_input_lines(a.input);
  const auto ids = encode_inputs(lines, *im.tokenizers, im.config.model.max_len - 2, a.input.empty() ? "stdin" : a.input);
  if (a.trace) trace_first_sentence(im, ids, a);
  for (const auto& hyp : translate_lines(im, ids, decode_options(im, a))) std::cout << hyp << "\n";
  return 0;
}

int run_eval(const TranslateArgs& a, const std::string& src_path, const std::string& ref_path) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  data::ParallelCorpus corpus = data::read_parallel(src_path, ref_path);
  const auto ids = encode_inputs(corpus.src, *im.tokenizers, im.config.model.max_len - 2, src_path);
  const auto hyps = translate_lines(im, ids, decode_options(im, a));
  const train::BleuResult bleu = train::corpus_bleu(hyps, corpus.tgt, im.config.data.bleu_tokenize);
  std::cout << train::format_bleu(bleu) << "\n";
  // teacher-forced loss on the pairs that fit the model
  std::vector<std::vector<std::int64_t>> src, tgt;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty() || corpus.tgt[i].size() > static_cast<std::size_t>(im.config.model.max_len) * data::kMaxBytesPerToken)
      continue;  // (a reference that long cannot fit: not tokenised, see data::kMaxBytesPerToken)
    auto t = im.tokenizers->tgt.encode(corpus.tgt[i]);
    if (ids[i].empty() || t.empty() || static_cast<std::int64_t>(t.size()) > im.config.model.max_len - 2) continue;
    src.push_back(ids[i]);
    tgt.push_back(std::move(t));
  }
  const auto loss = train::evaluate_loss(*im.model, src, tgt, im.config.data.batch_tokens, im.config.train.label_smoothing);
  std::cout << "loss " << loss.loss << " nll " << loss.nll << " ppl " << std::exp(loss.nll) << " (" << loss.tokens
            << " target tokens, " << src.size() << " pairs)\n";
  return 0;
}

int run_bleu(const std::string& ref_path, const std::string& tokenize) {
  const auto refs = data::read_lines(ref_path);
  const auto hyps = read_input_lines("");
  if (hyps.size() != refs.size())
    throw std::invalid_argument("bleu: " + std::to_string(hyps.size()) + " hypotheses on stdin but " +
                                std::to_string(refs.size()) + " references in " + ref_path);
  std::cout << train::format_bleu(train::corpus_bleu(hyps, refs, tokenize)) << "\n";
  return 0;
}

// gradcheck: the suite's entries named by `module` (an entry, a topic or "all") as a table.
int run_gradcheck(const std::string& module, bool list) {
  const auto& suite = train::gradcheck_suite();
  if (list) {
    std::cout << train::format_gradcheck_list(suite);
    return 0;
  }
  std::vector<const train::GradcheckEntry*> entries;
  for (const auto& e : suite)
    if (module == "all" || e.name == module || e.topic == module) entries.push_back(&e);
  if (entries.empty()) {
    std::vector<std::string> topics;
    for (const auto& e : suite)
      if (std::find(topics.begin(), topics.end(), e.topic) == topics.end()) topics.push_back(e.topic);
    std::string topic_list;
    for (const auto& t : topics) topic_list += (topic_list.empty() ? "" : ", ") + t;
    throw std::invalid_argument("gradcheck: unknown module '" + module + "'; valid: all, " + train::gradcheck_names() +
                                " (or a topic: " + topic_list + ")");
  }
  return train::run_gradcheck_table(entries, std::cout) ? 0 : 1;
}

struct AttentionArgs {
  std::string checkpoint, src, tgt, out;  // out: "" = the checkpoint's directory
};

int run_attention(const AttentionArgs& a, bool tgt_given) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  const auto fig = train::attention_figures(im, a.src, tgt_given ? std::optional<std::string>(a.tgt) : std::nullopt);
  const fs::path dir = a.out.empty() ? fs::absolute(a.checkpoint).parent_path() : fs::path(a.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("attention: cannot create the output directory " + dir.string() + ": " + ec.message());
  const std::string cross = (dir / "cross_attention.svg").string(), self = (dir / "self_attention.svg").string();
  train::write_file_atomically(cross, fig.cross_svg);
  train::write_file_atomically(self, fig.self_svg);
  std::cout << (fig.teacher_forced ? "target (teacher-forced): " : "translation (greedy): ") << fig.translation << "\n"
            << cross << "\n"
            << self << "\n";
  return 0;
}

struct PlotArgs {
  std::string run_dir, config, what, out;
  std::vector<std::string> overrides;
};

int run_plot(const PlotArgs& a) {
  if (!a.run_dir.empty() && !a.config.empty())
    throw std::invalid_argument("plot: give either a run directory or --config, not both");
  if (a.run_dir.empty() && a.config.empty())
    throw std::invalid_argument("plot: expected a run directory (training curves) or --config FILE --what positions|schedule");
  std::string svg;
  fs::path out = a.out;
  if (!a.run_dir.empty()) {
    if (!a.what.empty() || !a.overrides.empty())
      throw std::invalid_argument("plot: --what and --set go with --config, not with a run directory");
    if (!fs::is_directory(a.run_dir)) throw std::invalid_argument("plot: " + a.run_dir + " is not a directory");
    svg = train::training_curves_svg((fs::path(a.run_dir) / "metrics.tsv").string());
    if (out.empty()) out = fs::path(a.run_dir) / "curves.svg";
  } else {
    if (a.what.empty()) throw std::invalid_argument("plot: --config needs --what positions or --what schedule");
    const train::Config cfg = train::load_config(a.config, a.overrides);
    svg = a.what == "positions" ? train::positions_svg(cfg) : train::schedule_svg(cfg);
    if (out.empty()) out = fs::path(cfg.run.dir) / (a.what + ".svg");
  }
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  if (ec) throw std::runtime_error("plot: cannot create the directory of " + out.string() + ": " + ec.message());
  train::write_file_atomically(out.string(), svg);
  std::cout << out.string() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Scratchformer: a from-scratch C++ Transformer for learning how translation models work.\n"
               "Run `scratchformer COMMAND --help` for a command's options."};
  app.set_version_flag("--version", std::string("scratchformer ") + SCRATCHFORMER_VERSION);
  app.require_subcommand(0, 1);

  // train
  auto* train_cmd = app.add_subcommand("train", "Train a translation model from a TOML config");
  std::string config_path;
  std::vector<std::string> overrides;
  bool resume = false;
  train_cmd->add_option("--config", config_path, "Config file (TOML), e.g. configs/quickstart.toml")->required();
  train_cmd->add_option("--set", overrides, "Override a config key: section.key=value (repeatable)");
  train_cmd->add_flag("--resume", resume, "Continue the run in run.dir from checkpoint-last.safetensors");
  bool train_trace = false;
  train::TraceOptions train_opt;
  train_cmd->add_flag("--trace", train_trace, "Print each module's output and gradient statistics for the first step");
  train_cmd->add_option("--trace-steps", train_opt.trace_steps, "Trace the first N steps (implies --trace)")
      ->check(at_least_one("a number of steps"));
  train_cmd->add_option("--trace-file", train_opt.trace_file, "Write the trace to this file instead of stderr (implies --trace)");
  train_cmd->add_option("--dump-graph", train_opt.dump_graph,
                        "Write the first step's autograd graph as Graphviz DOT (and FILE.svg if `dot` is installed)");

  // translate
  TranslateArgs targs;
  auto* translate_cmd = app.add_subcommand("translate", "Translate sentences (one per line) with a trained checkpoint");
  translate_cmd->add_option("--checkpoint", targs.checkpoint, "Checkpoint file (its directory must hold the tokenizer)")->required();
  translate_cmd->add_option("--input", targs.input, "Input file (default: stdin)");
  translate_cmd->add_option("--beam", targs.beam, "Beam size (1 = greedy; default: the config's train.valid_beam)")
      ->check(beam_size_check());
  translate_cmd->add_option("--length-penalty", targs.length_penalty, "Beam search length penalty alpha (score / length^alpha)");
  translate_cmd->add_flag("--trace", targs.trace,
                          "Print each module's output statistics for the first sentence (encoder, first decoding step)");
  translate_cmd->add_option("--trace-steps", targs.trace_steps, "Decoding steps to trace (default: 1; implies --trace)")
      ->check(at_least_one("a number of steps"));
  translate_cmd->add_option("--trace-file", targs.trace_file, "Write the trace to this file instead of stderr (implies --trace)");

  // eval
  TranslateArgs eargs;
  std::string eval_src, eval_ref;
  auto* eval_cmd = app.add_subcommand("eval", "BLEU (with signature), loss and perplexity of a checkpoint on a test set");
  eval_cmd->add_option("--checkpoint", eargs.checkpoint, "Checkpoint file")->required();
  eval_cmd->add_option("--src", eval_src, "Source sentences, one per line")->required();
  eval_cmd->add_option("--ref", eval_ref, "Reference translations, aligned with --src")->required();
  eval_cmd->add_option("--beam", eargs.beam, "Beam size (default: the config's train.valid_beam)")->check(beam_size_check());

  // bleu
  std::string bleu_ref, bleu_tok = "13a";
  auto* bleu_cmd = app.add_subcommand("bleu", "Corpus BLEU of hypotheses on stdin against references (sacreBLEU-compatible)");
  bleu_cmd->add_option("--ref", bleu_ref, "Reference file, one sentence per line")->required();
  bleu_cmd->add_option("--tokenize", bleu_tok, "Tokenizer: 13a (default) or zh")->check(CLI::IsMember({"13a", "zh"}));

  // summary
  std::string summary_config;
  std::int64_t summary_len = 0, summary_batch = 1;
  auto* summary_cmd = app.add_subcommand("summary", "Module tree, parameter counts vs the lecture's formulas, FLOPs, KV cache");
  summary_cmd->add_option("--config", summary_config, "Config file (TOML)")->required();
  summary_cmd->add_option("--length", summary_len, "Sequence length for FLOPs and KV cache (default: 32)");
  summary_cmd->add_option("--batch", summary_batch, "Batch size for the KV-cache bytes (default: 1)");
  std::vector<std::string> summary_overrides;
  summary_cmd->add_option("--set", summary_overrides, "Override a config key: section.key=value (repeatable)");
  std::int64_t summary_vocab = 8000;
  summary_cmd->add_option("--vocab", summary_vocab, "Vocabulary size to assume (default: data.tokenizer_vocab_size)");

  // bench
  std::string bench_config;
  std::vector<std::string> bench_overrides;
  train::BenchOptions bench_opt;
  auto* bench_cmd = app.add_subcommand("bench", "Training-step and decoding speed of a reference model, next to BLAS");
  bench_cmd->add_option("--config", bench_config, "Config file (TOML), e.g. configs/bench.toml")->required();
  bench_cmd->add_option("--set", bench_overrides, "Override a config key: section.key=value (repeatable)");
  bench_cmd->add_option("--steps", bench_opt.steps, "Timed training steps, the median is reported (default: 20)");
  bench_cmd->add_option("--warmup", bench_opt.warmup, "Untimed training steps first (default: 3)");
  bench_cmd->add_option("--threads", bench_opt.threads, "Threads (default: the config's run.threads; 0 there = all cores)");
  bench_cmd->add_option("--decode-sentences", bench_opt.decode_sentences,
                        "Test sentences decoded per setting, 0 = no decoding (default: 64)");
  bench_cmd->add_option("--checkpoint", bench_opt.checkpoint, "Decode with this trained model (default: a random one)");
  bench_cmd->add_flag("--json", bench_opt.json_only, "Print only the JSON line");
  bench_cmd->add_flag("--scaling", bench_opt.scaling,
                      "Instead: step time, FLOPs and peak tensor memory at T = 16..256 (fixed token budget), plain vs "
                      "tiled attention (default --steps 3 --warmup 1)");

  auto* demo_cmd = app.add_subcommand("demo", "Print a tiny forward and backward pass (tensors and autograd at work)");

  // gradcheck
  std::string gradcheck_module = "all";
  bool gradcheck_list = false;
  auto* gradcheck_cmd = app.add_subcommand(
      "gradcheck", "Float64 gradient checks of every op and module, as a table (exit status 1 on a failure)");
  gradcheck_cmd->add_option("--module", gradcheck_module, "A check (see --list), a topic such as attention, or all (default)");
  gradcheck_cmd->add_flag("--list", gradcheck_list, "List the checks with a one-line description each");

  // attention
  AttentionArgs aargs;
  auto* attention_cmd = app.add_subcommand(
      "attention", "Heatmaps of every decoder layer's cross- and self-attention, per head, for one sentence (SVG)");
  attention_cmd->add_option("--checkpoint", aargs.checkpoint, "Checkpoint file (its directory must hold the tokenizer)")
      ->required();
  attention_cmd->add_option("--src", aargs.src, "The source sentence")->required();
  attention_cmd->add_option("--tgt", aargs.tgt, "A target to feed (teacher forcing) instead of the greedy translation");
  attention_cmd->add_option("--out", aargs.out,
                            "Directory for cross_attention.svg and self_attention.svg (default: the checkpoint's)");

  // plot
  PlotArgs pargs;
  auto* plot_cmd = app.add_subcommand(
      "plot", "Draw a run's training curves (RUN_DIR/metrics.tsv), or a config's positional encodings or LR schedule (SVG)");
  plot_cmd->add_option("run_dir", pargs.run_dir, "Run directory holding metrics.tsv (writes RUN_DIR/curves.svg)");
  plot_cmd->add_option("--config", pargs.config, "Config file (TOML), with --what");
  plot_cmd->add_option("--what", pargs.what, "With --config: positions (sinusoidal table) or schedule (learning rate per step)")
      ->check(CLI::IsMember({"positions", "schedule"}));
  plot_cmd->add_option("--out", pargs.out, "Output SVG file (default: RUN_DIR/curves.svg or run.dir/WHAT.svg)");
  plot_cmd->add_option("--set", pargs.overrides, "Override a config key: section.key=value (repeatable)");

  // explain-batch
  std::string explain_config;
  std::vector<std::string> explain_overrides;
  train::ExplainOptions explain_opt;
  auto* explain_cmd = app.add_subcommand(
      "explain-batch", "Print one real training batch: tokens, decoder input and target (teacher forcing), masks, counts");
  explain_cmd->add_option("--config", explain_config, "Config file (TOML)")->required();
  explain_cmd->add_option("--batch", explain_opt.batch, "Which batch of the first epoch, 0-based (default: 0)");
  explain_cmd->add_option("--rows", explain_opt.rows, "Sentence pairs to print in full (default: 3)");
  explain_cmd->add_option("--set", explain_overrides, "Override a config key: section.key=value (repeatable)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // help and version go to stdout with status 0; a bad command line is one line on stderr, status 2
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::cerr << "scratchformer: error: " << what << " (run with --help to see the options)\n";
    return 2;
  }
  // MPI, when started by mpirun (data-parallel training, train/distributed/distributed.h); finalized when main
  // returns. Without mpirun this does nothing.
  std::optional<train::DistributedScope> distributed;
  try {
    distributed.emplace(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "scratchformer: error: " << e.what() << "\n";
    return 2;
  }
  try {
    init_threads();
    if (demo_cmd->parsed()) return run_demo();
    if (bench_cmd->parsed() && bench_opt.scaling) {
      if (bench_cmd->count("--steps") == 0) bench_opt.steps = train::kScalingSteps;
      if (bench_cmd->count("--warmup") == 0) bench_opt.warmup = train::kScalingWarmup;
      return train::run_scaling_bench(train::load_config(bench_config, bench_overrides), bench_opt);
    }
    if (bench_cmd->parsed()) return train::run_bench(train::load_config(bench_config, bench_overrides), bench_opt);
    if (gradcheck_cmd->parsed()) return run_gradcheck(gradcheck_module, gradcheck_list);
    if (attention_cmd->parsed()) return run_attention(aargs, attention_cmd->count("--tgt") > 0);
    if (plot_cmd->parsed()) return run_plot(pargs);
    if (explain_cmd->parsed()) {
      const train::Config cfg = train::load_config(explain_config, explain_overrides);
      std::cout << train::explain_batch(cfg, explain_opt, std::cerr);
      return 0;
    }
    if (train_cmd->parsed()) {
      train::Config cfg = train::load_config(config_path, overrides);
      if (train_opt.trace_steps == 0 && (train_trace || !train_opt.trace_file.empty())) train_opt.trace_steps = 1;
      train::TraceHooks hooks(train_opt);
      return train::train(cfg, {resume, &hooks});
    }
    if (translate_cmd->parsed()) {
      targs.trace = targs.trace || translate_cmd->count("--trace-steps") > 0 || !targs.trace_file.empty();
      return run_translate(targs);
    }
    if (eval_cmd->parsed()) return run_eval(eargs, eval_src, eval_ref);
    if (bleu_cmd->parsed()) return run_bleu(bleu_ref, bleu_tok);
    if (summary_cmd->parsed()) {
      train::Config cfg = train::load_config(summary_config, summary_overrides);
      const bool vocab_given = summary_cmd->count("--vocab") > 0;
      std::cout << train::model_summary(cfg, vocab_given ? summary_vocab : cfg.data.tokenizer_vocab_size,
                                        summary_len > 0 ? summary_len : 32, summary_batch);
      return 0;
    }
    std::cout << app.help();
    return 0;
  } catch (const std::exception& e) {
    // one of several ranks: end them all (they would wait for this one forever), status 2
    if (train::world_size() > 1)
      train::abort_job(2, "scratchformer: error on rank " + std::to_string(train::rank()) + " of " +
                              std::to_string(train::world_size()) + ": " + e.what());
    std::cerr << "scratchformer: error: " << e.what() << "\n";
    return 2;
  }
}
