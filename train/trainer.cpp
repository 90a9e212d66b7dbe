#include "train/trainer.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "train/bleu.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"
#include "train/decode.h"
#include "train/distributed.h"
#include "train/evaluate.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/trace.h"

namespace sf::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// ---- signals: Ctrl-C / kill finish the current step, save, and exit -----------------------
std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

struct SignalScope {
  struct sigaction old_int{}, old_term{};
  SignalScope() {
    g_signal = 0;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  std::ostringstream os;
  if (s >= 3600) os << s / 3600 << "h" << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << "m";
  else if (s >= 60) os << s / 60 << "m" << std::setw(2) << std::setfill('0') << s % 60 << "s";
  else os << s << "s";
  return os.str();
}

// ---- metrics.tsv: one row per log or validation event -------------------------------------
class MetricsFile {
 public:
  static constexpr const char* kHeader =
      "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\tallreduce_share";
  // enabled false (ranks other than 0 in data-parallel training): writes nothing
  explicit MetricsFile(const fs::path& path, bool enabled = true) {
    if (!enabled) return;
    const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
    out_.open(path, std::ios::app);
    if (!out_) throw std::runtime_error("cannot open " + path.string() + " for writing");
    if (fresh) out_ << kHeader << "\n";
    out_.flush();
  }
  void row(std::int64_t step, std::int64_t epoch, const char* kind, double loss, double nll, double lr,
           double tokens_per_s, double grad_norm, double bleu, double elapsed,
           double allreduce_share = NAN) {  // data-parallel: share of the wall time in gradient allreduce
    if (!out_.is_open()) return;
    auto num = [](double v) {
      if (std::isnan(v)) return std::string("");
      std::ostringstream os;
      os << std::setprecision(6) << v;
      return os.str();
    };
    out_ << step << "\t" << epoch << "\t" << kind << "\t" << num(loss) << "\t" << num(nll) << "\t"
         << num(std::isnan(nll) ? NAN : std::exp(nll)) << "\t" << num(lr) << "\t" << num(tokens_per_s) << "\t"
         << num(grad_norm) << "\t" << num(bleu) << "\t" << num(elapsed) << "\t" << num(allreduce_share) << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// ---- the terminal: a progress bar on a TTY, plain lines otherwise --------------------------
class Progress {
 public:
  Progress() : tty_(isatty(STDOUT_FILENO)) {}
  bool tty() const { return tty_; }
  void bar(const std::string& line) {
    if (!tty_ || !is_main()) return;  // in data-parallel training only rank 0 prints
    std::cout << "\r\033[K" << line << std::flush;
    open_ = true;
  }
  void line(const std::string& text) {
    if (!is_main()) return;
    if (open_) std::cout << "\r\033[K";
    std::cout << text << "\n" << std::flush;
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
};

// Room for a few checkpoints: refuse to start a run that could not save one.
void check_run_dir(const fs::path& dir, std::int64_t checkpoint_bytes, std::int64_t keep_checkpoints) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("run.dir " + dir.string() + ": cannot create it: " + ec.message());
  const fs::path probe = dir / ".write-test";
  bool writable = false;
  {
    std::ofstream out(probe);
    writable = out && (out << "ok") && out.flush();
  }
  std::error_code ignored;
  fs::remove(probe, ignored);  // also when the write failed: leave nothing behind
  if (!writable)
    throw std::runtime_error("run.dir " + dir.string() + " is not writable (a test file cannot be written there: " +
                             "is the disk full or the folder read-only?)");
  struct statvfs st{};
  if (statvfs(dir.c_str(), &st) == 0) {
    const double free_bytes = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
    // the kept checkpoints (checkpoint-last and keep - 1 step files) + best + a temporary
    const double needed = static_cast<double>(keep_checkpoints + 2) * static_cast<double>(checkpoint_bytes) + 64e6;
    if (free_bytes < needed)
      throw std::runtime_error("run.dir " + dir.string() + ": only " + std::to_string(static_cast<long long>(free_bytes / 1e6)) +
                               " MB free, need about " + std::to_string(static_cast<long long>(needed / 1e6)) +
                               " MB for checkpoints");
  }
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

struct EncodedSplit {
  std::vector<std::vector<std::int64_t>> src, tgt;
  std::vector<std::string> src_text, tgt_text;  // kept aligned with the ids
};

EncodedSplit load_split(const std::string& src_path, const std::string& tgt_path, const Tokenizers& tok,
                        std::int64_t max_tokens, const char* name, Progress& progress) {
  data::ParallelCorpus corpus = data::read_parallel(src_path, tgt_path);
  // lines far too long are dropped before tokenising (a 10 MB line would take GBs to tokenise)
  const std::int64_t overlong = data::drop_overlong_pairs(corpus, max_tokens);
  EncodedSplit s;
  s.src = tok.src.encode_all(corpus.src);
  s.tgt = tok.tgt.encode_all(corpus.tgt);
  data::FilterReport report = data::filter_pairs(corpus, s.src, s.tgt, max_tokens);
  report.too_long += overlong;
  progress.line(std::string(name) + ": " + report.summary(max_tokens));
  if (report.kept == 0)
    throw data::CorpusError(std::string(name) + " corpus " + src_path + ": no sentence pair is left after filtering");
  s.src_text = std::move(corpus.src);
  s.tgt_text = std::move(corpus.tgt);
  return s;
}

// Data-parallel training (train/distributed.h): rank r of n takes the rows r, r + n, r + 2n, ...
// of the global batch (strided, so every rank gets short and long pairs alike: the batcher sorts
// a batch's rows by length), rebuilt with make_batch so its padding fits its own rows. With more
// ranks than rows a rank's shard is empty (rows() == 0).
data::Batch shard_of(const data::Batch& global, const EncodedSplit& split, int r, int n) {
  std::vector<const std::vector<std::int64_t>*> src, tgt;
  std::vector<std::int64_t> indices;
  for (std::int64_t row = r; row < global.rows(); row += n) {
    const auto i = static_cast<std::size_t>(global.indices[static_cast<std::size_t>(row)]);
    src.push_back(&split.src[i]);
    tgt.push_back(&split.tgt[i]);
    indices.push_back(global.indices[static_cast<std::size_t>(row)]);
  }
  if (indices.empty()) return {};
  return data::make_batch(src, tgt, indices);
}

std::unique_ptr<Optimizer> make_optimizer(const TrainSection& t, NamedParameters params) {
  if (t.optimizer == "adam") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, false);
  if (t.optimizer == "adamw") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, true);
  if (t.optimizer == "sgd") return std::make_unique<SGD>(std::move(params), t.momentum, t.weight_decay);
  throw std::invalid_argument("train.optimizer: expected adam, adamw or sgd, got '" + t.optimizer + "'");
}

}  // namespace

int train(const Config& cfg, const TrainOptions& options) {
  Progress progress;
  if (cfg.run.threads > 0) set_num_threads(static_cast<int>(cfg.run.threads));
  // data-parallel: mpirun binds each rank to a core, so one thread per rank unless asked otherwise
  else if (world_size() > 1 && !std::getenv("SCRATCHFORMER_NUM_THREADS")) set_num_threads(1);
  const fs::path dir(cfg.run.dir);
  const fs::path last_path = dir / "checkpoint-last.safetensors";
  const fs::path best_path = dir / "checkpoint-best.safetensors";
  if (options.resume && !fs::exists(last_path))
    throw std::runtime_error("--resume: no checkpoint to resume from at " + last_path.string());
  if (!options.resume && fs::exists(last_path))
    throw std::runtime_error("run.dir " + dir.string() +
                             " already holds a run (checkpoint-last.safetensors); pass --resume to continue it "
                             "or set another run.dir (--set run.dir=...)");
  const std::string config_toml = to_toml(cfg);
  if (is_main()) {  // data-parallel: rank 0 alone writes to run.dir
    check_run_dir(dir, 0, cfg.run.keep_checkpoints);
    write_text_atomically(dir / "config.toml", config_toml);
  }

  // ---- tokenizers and data ----
  progress.line("scratchformer train: run directory " + dir.string());
  // data-parallel: rank 0 trains (or loads) the tokenizer into run.dir while the others wait at
  // the barrier; then they load it from there
  if (!is_main()) barrier();
  // a resumed run needs the tokenizer it was trained with: never train a new one silently
  const Tokenizers tok = options.resume ? load_tokenizers(cfg, cfg.run.dir)
                                        : load_or_train_tokenizers(cfg, static_cast<std::uint64_t>(cfg.train.seed));
  if (is_main()) barrier();
  progress.line("tokenizer: vocabulary " + std::to_string(tok.src.vocab_size()) +
                (cfg.data.joint_tokenizer ? " (joint, " + tok.src.model_path() + ")" : " (source) / " + std::to_string(tok.tgt.vocab_size()) + " (target)"));
  EncodedSplit train_split = load_split(cfg.data.train_src, cfg.data.train_tgt, tok, cfg.data.max_tokens, "train", progress);
  EncodedSplit valid_split = load_split(cfg.data.valid_src, cfg.data.valid_tgt, tok, cfg.model.max_len - 2, "valid", progress);
  if (cfg.data.max_valid_sentences > 0 && static_cast<std::int64_t>(valid_split.src.size()) > cfg.data.max_valid_sentences) {
    const auto n = static_cast<std::size_t>(cfg.data.max_valid_sentences);
    valid_split.src.resize(n), valid_split.tgt.resize(n), valid_split.src_text.resize(n), valid_split.tgt_text.resize(n);
  }
  data::Batcher batcher(train_split.src, train_split.tgt, cfg.data.batch_tokens, static_cast<std::uint64_t>(cfg.train.seed), true);

  // ---- model and optimizer ----
  Generator init_gen(static_cast<std::uint64_t>(cfg.train.seed));
  const nn::ModelConfig mcfg = model_config_from(cfg.model, tok.src.vocab_size(), tok.tgt.vocab_size());
  nn::Seq2SeqTransformer model(mcfg, init_gen);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(cfg.train, model.named_parameters());
  const std::int64_t checkpoint_bytes = model.parameter_count() * 4 * 3;  // weights + Adam's m and v
  if (is_main()) check_run_dir(dir, checkpoint_bytes, cfg.run.keep_checkpoints);
  Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                    cfg.train.max_steps, cfg.model.d_model};

  TrainingState st;
  if (options.resume) {
    LoadedCheckpoint ck = load_checkpoint(last_path.string());
    if (ck.src_vocab != tok.src.vocab_size() || ck.tgt_vocab != tok.tgt.vocab_size())
      throw CheckpointError(last_path.string() + ": vocabulary sizes differ from the run's tokenizer");
    check_checkpoint_dtypes(ck, model, last_path.string());
    try {
      model.load_state_dict(ck.model);
      optimizer->load_state(ck.optimizer);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(last_path.string() + " does not match the config: " + e.what());
    }
    optimizer->set_steps(ck.optimizer_steps);
    st = ck.state;
    model.dropout_generator().set_state(st.dropout_rng);
    batcher.set_position({st.epoch, st.batch_in_epoch});
    progress.line("resumed from " + last_path.string() + " at step " + std::to_string(st.step));
  }
  if (rank() > 0) {
    // data-parallel: each rank draws its own dropout masks, from a stream derived from rank 0's
    // (the one saved in checkpoints) and the rank number, so a run is reproducible; with dropout
    // > 0 an N-rank run is therefore not bit-equal to one process, only statistically the same
    const std::uint64_t base = model.dropout_generator().state()[0];
    model.dropout_generator().manual_seed(base ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank())));
  }
  if (world_size() > 1)
    progress.line("data-parallel: " + std::to_string(world_size()) + " processes (MPI); every step's global batch of about " +
                  std::to_string(cfg.data.batch_tokens) + " x " + std::to_string(cfg.train.accum_steps) +
                  " tokens is split between them, about " + std::to_string(cfg.data.batch_tokens / world_size()) +
                  " tokens each, gradients summed with MPI_Allreduce");
  progress.line("model: " + std::to_string(model.parameter_count()) + " parameters; " +
                std::to_string(batcher.batches_per_epoch()) + " batches per epoch of about " +
                std::to_string(cfg.data.batch_tokens) + " tokens");
  MetricsFile metrics(dir / "metrics.tsv", is_main());

  std::int64_t last_saved_step = options.resume ? st.step : -1;  // the step of the checkpoint-last on disk
  auto save = [&](const fs::path& path) {
    if (!is_main()) return;  // data-parallel: rank 0 alone writes checkpoints
    const auto pos = batcher.position();
    st.epoch = pos.epoch;
    st.batch_in_epoch = pos.batch_in_epoch;
    st.dropout_rng = model.dropout_generator().state();
    if (path == last_path) {  // checkpoint-last, keeping the last run.keep_checkpoints (checkpoint.h)
      save_last_checkpoint(dir.string(), cfg.run.keep_checkpoints, last_saved_step, model, optimizer.get(), st, config_toml,
                           tok.src.vocab_size(), tok.tgt.vocab_size());
      last_saved_step = st.step;
      return;
    }
    save_checkpoint(path.string(), model, optimizer.get(), st, config_toml, tok.src.vocab_size(), tok.tgt.vocab_size());
  };

  DecodeOptions valid_decode;
  valid_decode.beam = cfg.train.valid_beam;
  auto validate = [&]() -> bool {  // returns true when patience ran out
    const auto t0 = Clock::now();
    const LossResult vl = evaluate_loss(model, valid_split.src, valid_split.tgt, cfg.data.batch_tokens, cfg.train.label_smoothing);
    const BleuResult bleu = evaluate_bleu(model, tok, valid_split.src, valid_split.tgt_text, valid_decode, cfg.data.bleu_tokenize);
    model.train();
    const double metric = cfg.train.best_metric == "bleu" ? bleu.score : -vl.nll;
    const bool improved = !st.has_best || metric > st.best_metric;
    std::ostringstream os;
    os << "valid step " << st.step << ": loss " << std::fixed << std::setprecision(3) << vl.loss << " nll " << vl.nll
       << " ppl " << std::setprecision(2) << std::exp(vl.nll) << " BLEU " << bleu.score << " ("
       << format_duration(std::chrono::duration<double>(Clock::now() - t0).count()) << ")"
       << (improved ? " *best*" : "");
    progress.line(os.str());
    metrics.row(st.step, batcher.position().epoch, "valid", vl.loss, vl.nll, NAN, NAN, NAN, bleu.score, st.elapsed_seconds);
    if (improved) {
      st.best_metric = metric;
      st.has_best = true;
      st.bad_validations = 0;
      save(best_path);
    } else {
      ++st.bad_validations;
    }
    save(last_path);
    return cfg.train.patience > 0 && st.bad_validations >= cfg.train.patience;
  };

  // --trace: the tables go to --trace-file, or to stderr
  std::ofstream trace_file;
  if (options.trace_steps > 0 && !options.trace_file.empty() && is_main()) {
    trace_file.open(options.trace_file, std::ios::trunc);
    if (!trace_file) throw std::runtime_error("--trace-file: cannot open " + options.trace_file + " for writing");
  }
  std::ostream& trace_out = trace_file.is_open() ? static_cast<std::ostream&>(trace_file) : std::cerr;

  // ---- the loop ----
  SignalScope signals;
  model.train();
  const std::int64_t pad = data::kPadId;
  std::int64_t interval_tokens = 0;  // global (all ranks') target tokens since the last log line
  auto interval_start = Clock::now();
  double interval_allreduce_start = allreduce_seconds();
  auto session_start = Clock::now();
  const double elapsed_before = st.elapsed_seconds;
  const std::int64_t start_step = st.step;
  std::string stop_reason = "max_steps reached";
  bool last_was_validation = false;

  while (st.step < cfg.train.max_steps) {
    // one optimizer step = accum_steps batches
    double step_loss = 0, step_nll = 0;  // step_nll is only computed (and used) when log_now
    std::int64_t step_tokens = 0;
    bool epoch_limit = false;
    // Log every log_every steps, and also the first steps of a session (steps 1 and 10), so a
    // run without a terminal shows signs of life before the first full interval.
    const std::int64_t session_step = st.step - start_step + 1;
    const bool log_now = (st.step + 1) % cfg.train.log_every == 0 ||
                         ((session_step == 1 || session_step == 10) && session_step < cfg.train.log_every);
    for (std::int64_t micro = 0; micro < cfg.train.accum_steps; ++micro) {
      data::Batch batch;
      if (!batcher.next(batch)) {  // end of an epoch
        if (cfg.train.max_epochs > 0 && batcher.position().epoch >= cfg.train.max_epochs) {
          epoch_limit = true;
          break;
        }
        batcher.next(batch);
      }
      // Data-parallel (world_size() > 1): this rank's shard of the global batch. The loss is the
      // mean over the shard's target tokens times shard tokens / global tokens, i.e. the sum of
      // the shard's token losses over the GLOBAL token count: summed over ranks by the allreduce
      // below, it is exactly one process's mean over the whole batch, and so are the gradients.
      const std::int64_t global_tokens = batch.tgt_tokens;
      step_tokens += global_tokens;
      if (world_size() > 1) batch = shard_of(batch, train_split, rank(), world_size());
      const double share = static_cast<double>(batch.tgt_tokens) / static_cast<double>(global_tokens);
      if (batch.rows() == 0) continue;  // more ranks than rows: this rank adds zero gradients
      // --trace: hooks on every module for the first micro-batch of the first trace_steps steps
      std::unique_ptr<ModuleTrace> trace;
      if (micro == 0 && st.step - start_step < options.trace_steps && is_main())
        trace = std::make_unique<ModuleTrace>(model, /*gradients=*/true);
      Tensor logits = model.forward(batch.src, batch.tgt_in);  // (B,T,V)
      const std::int64_t V = logits.size(-1);
      Tensor flat_logits = logits.reshape({-1, V});           // (B*T, V)
      Tensor targets = batch.tgt_out.reshape({-1});            // (B*T)
      Tensor loss = cross_entropy(flat_logits, targets, pad, cfg.train.label_smoothing);
      if (share != 1.0) loss = mul(loss, share);
      if (cfg.train.accum_steps > 1) loss = div(loss, static_cast<double>(cfg.train.accum_steps));
      if (micro == 0 && st.step == start_step && !options.dump_graph.empty() && is_main())
        dump_graph(loss, model, options.dump_graph, std::cout);  // before backward frees the saved tensors
      loss.backward();
      if (trace) {
        trace->stop();
        write_step_trace(trace_out, st.step + 1, *trace);
        trace.reset();
      }
      step_loss += loss.item();
      if (log_now) {  // the unsmoothed NLL of the same batches, for the log line
        NoGradGuard no_grad;
        const double nll = cross_entropy(flat_logits.detach(), targets, pad, 0.0).item() * share /
                           static_cast<double>(cfg.train.accum_steps);
        step_nll += nll;
      }
    }
    if (epoch_limit) {
      stop_reason = "max_epochs reached";
      break;
    }
    if (world_size() > 1) {
      // data-parallel: add up the ranks' gradients (one MPI_Allreduce over a flat buffer) and
      // losses; from here on every rank holds the same numbers and takes the same step
      allreduce_gradients(optimizer->params());
      std::vector<double> losses = {step_loss, step_nll};
      allreduce_sum(losses);
      step_loss = losses[0], step_nll = losses[1];
    }
    const double grad_norm = clip_grad_norm(optimizer->params(), cfg.train.clip_norm);
    if (!std::isfinite(step_loss) || !std::isfinite(grad_norm)) {
      optimizer->zero_grad();
      ++st.nonfinite_streak;
      progress.line("step " + std::to_string(st.step + 1) + ": non-finite " + (std::isfinite(step_loss) ? "gradient norm" : "loss") +
                    ", update skipped (" + std::to_string(st.nonfinite_streak) + " in a row)");
      metrics.row(st.step + 1, batcher.position().epoch, "skipped", step_loss, NAN, NAN, NAN, grad_norm, NAN, st.elapsed_seconds);
      if (st.nonfinite_streak >= cfg.train.max_nonfinite) {
        progress.line("stopping: " + std::to_string(st.nonfinite_streak) +
                      " non-finite steps in a row (train.max_nonfinite); the last good checkpoint is " + last_path.string() +
                      ". Try a lower train.lr or train.clip_norm.");
        return 1;
      }
      continue;
    }
    st.nonfinite_streak = 0;
    const double lr = schedule.at(st.step + 1);
    optimizer->step(lr);
    optimizer->zero_grad();
    ++st.step;
    st.tokens_seen += step_tokens;
    interval_tokens += step_tokens;
    last_was_validation = false;

    const double now = std::chrono::duration<double>(Clock::now() - session_start).count();
    st.elapsed_seconds = elapsed_before + now;
    const double per_step = now / static_cast<double>(st.step - start_step);
    const double eta = per_step * static_cast<double>(cfg.train.max_steps - st.step);
    const double interval_s = std::chrono::duration<double>(Clock::now() - interval_start).count();
    const double tok_per_s = interval_s > 0 ? static_cast<double>(interval_tokens) / interval_s : 0;
    const double allreduce_share = world_size() > 1 && interval_s > 0 ? (allreduce_seconds() - interval_allreduce_start) / interval_s : NAN;
    if (progress.tty()) {
      std::ostringstream os;
      os << "step " << st.step << "/" << cfg.train.max_steps << " | epoch " << batcher.position().epoch + 1 << " | loss "
         << std::fixed << std::setprecision(3) << step_loss << " | lr " << std::scientific << std::setprecision(2) << lr
         << " | " << std::fixed << std::setprecision(0) << tok_per_s << " tok/s | ETA " << format_duration(eta);
      if (world_size() > 1)  // data-parallel: tokens/s of all ranks together
        os << " | " << world_size() << " ranks, allreduce " << std::setprecision(1) << 100 * allreduce_share << "%";
      progress.bar(os.str());
    }
    if (log_now) {
      // loss and nll of this step's batches (the same data, so they compare); tokens/s over the
      // interval since the last log line
      metrics.row(st.step, batcher.position().epoch, "train", step_loss, step_nll, lr, tok_per_s, grad_norm, NAN, st.elapsed_seconds,
                  allreduce_share);
      if (!progress.tty()) {
        std::ostringstream os;
        os << "step " << st.step << "/" << cfg.train.max_steps << " epoch " << batcher.position().epoch + 1 << " loss " << std::fixed
           << std::setprecision(3) << step_loss << " nll " << step_nll << " ppl " << std::setprecision(2) << std::exp(step_nll)
           << " lr " << std::scientific << std::setprecision(2) << lr << " " << std::fixed << std::setprecision(0) << tok_per_s
           << " tok/s ETA " << format_duration(eta);
        if (world_size() > 1)  // tokens/s above are all ranks' together
          os << " (" << world_size() << " ranks, allreduce " << std::setprecision(1) << 100 * allreduce_share << "% of the time)";
        progress.line(os.str());
      }
      interval_tokens = 0;
      interval_start = Clock::now();
      interval_allreduce_start = allreduce_seconds();
    }
    if (st.step % cfg.train.valid_every == 0) {
      last_was_validation = true;
      check_parameters_in_sync(optimizer->params());  // data-parallel: the ranks still agree
      // data-parallel: rank 0 validates (and saves); the others wait for its patience verdict
      if (allreduce_max(is_main() && validate() ? 1 : 0) != 0) {
        stop_reason = "no improvement in " + std::to_string(cfg.train.patience) + " validations (train.patience)";
        break;
      }
    }
    if (const int sig = allreduce_max(g_signal); sig != 0) {  // data-parallel: a signal on any rank stops all
      save(last_path);
      progress.line(std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ") at step " + std::to_string(st.step) +
                    "; saved " + last_path.string() + "\nresume with: scratchformer train --config " + cfg.source_path +
                    " --resume");
      return 128 + sig;
    }
  }
  if (!is_main()) return 0;  // data-parallel: the rest (validation, test BLEU) is rank 0's
  if (!last_was_validation && st.step > start_step && validate()) stop_reason += "; patience ran out";
  if (st.step == start_step && !fs::exists(last_path)) save(last_path);
  progress.line("training stopped: " + stop_reason + " after " + std::to_string(st.step) + " steps, " +
                format_duration(st.elapsed_seconds) + " of training");

  // ---- test BLEU with the best checkpoint, and a few samples ----
  if (!cfg.data.test_src.empty() && !cfg.data.test_tgt.empty()) {
    if (fs::exists(best_path)) model.load_state_dict(load_checkpoint(best_path.string()).model);
    EncodedSplit test = load_split(cfg.data.test_src, cfg.data.test_tgt, tok, cfg.model.max_len - 2, "test", progress);
    std::vector<std::string> hyps;
    const BleuResult bleu = evaluate_bleu(model, tok, test.src, test.tgt_text, valid_decode, cfg.data.bleu_tokenize, &hyps);
    progress.line("test (" + std::string(fs::exists(best_path) ? "checkpoint-best" : "last weights") + "): " + format_bleu(bleu));
    for (std::size_t i = 0; i < std::min<std::size_t>(5, hyps.size()); ++i)
      progress.line("  src: " + test.src_text[i] + "\n  ref: " + test.tgt_text[i] + "\n  hyp: " + hyps[i]);
    metrics.row(st.step, batcher.position().epoch, "test", NAN, NAN, NAN, NAN, NAN, bleu.score, st.elapsed_seconds);
  }
  return 0;
}

}  // namespace sf::train
