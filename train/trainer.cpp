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
#include "train/evaluate.h"
#include "train/schedule.h"
#include "train/setup.h"

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
      "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s";
  explicit MetricsFile(const fs::path& path) {
    const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
    out_.open(path, std::ios::app);
    if (!out_) throw std::runtime_error("cannot open " + path.string() + " for writing");
    if (fresh) out_ << kHeader << "\n";
    out_.flush();
  }
  void row(std::int64_t step, std::int64_t epoch, const char* kind, double loss, double nll, double lr,
           double tokens_per_s, double grad_norm, double bleu, double elapsed) {
    auto num = [](double v) {
      if (std::isnan(v)) return std::string("");
      std::ostringstream os;
      os << std::setprecision(6) << v;
      return os.str();
    };
    out_ << step << "\t" << epoch << "\t" << kind << "\t" << num(loss) << "\t" << num(nll) << "\t"
         << num(std::isnan(nll) ? NAN : std::exp(nll)) << "\t" << num(lr) << "\t" << num(tokens_per_s) << "\t"
         << num(grad_norm) << "\t" << num(bleu) << "\t" << num(elapsed) << "\n";
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
    if (!tty_) return;
    std::cout << "\r\033[K" << line << std::flush;
    open_ = true;
  }
  void line(const std::string& text) {
    if (open_) std::cout << "\r\033[K";
    std::cout << text << "\n" << std::flush;
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
};

// Room for a few checkpoints: refuse to start a run that could not save one.
void check_run_dir(const fs::path& dir, std::int64_t checkpoint_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("run.dir " + dir.string() + ": cannot create it: " + ec.message());
  const fs::path probe = dir / ".write-test";
  {
    std::ofstream out(probe);
    if (!out || !(out << "ok") || !out.flush())
      throw std::runtime_error("run.dir " + dir.string() + " is not writable");
  }
  fs::remove(probe);
  struct statvfs st{};
  if (statvfs(dir.c_str(), &st) == 0) {
    const double free_bytes = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
    const double needed = 3.0 * static_cast<double>(checkpoint_bytes) + 64e6;  // last + best + a temporary
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
  EncodedSplit s;
  s.src = tok.src.encode_all(corpus.src);
  s.tgt = tok.tgt.encode_all(corpus.tgt);
  const data::FilterReport report = data::filter_pairs(corpus, s.src, s.tgt, max_tokens);
  progress.line(std::string(name) + ": " + report.summary(max_tokens));
  if (report.kept == 0)
    throw data::CorpusError(std::string(name) + " corpus " + src_path + ": no sentence pair is left after filtering");
  s.src_text = std::move(corpus.src);
  s.tgt_text = std::move(corpus.tgt);
  return s;
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
  const fs::path dir(cfg.run.dir);
  const fs::path last_path = dir / "checkpoint-last.safetensors";
  const fs::path best_path = dir / "checkpoint-best.safetensors";
  if (options.resume && !fs::exists(last_path))
    throw std::runtime_error("--resume: no checkpoint to resume from at " + last_path.string());
  if (!options.resume && fs::exists(last_path))
    throw std::runtime_error("run.dir " + dir.string() +
                             " already holds a run (checkpoint-last.safetensors); pass --resume to continue it "
                             "or set another run.dir (--set run.dir=...)");
  check_run_dir(dir, 0);
  const std::string config_toml = to_toml(cfg);
  write_text_atomically(dir / "config.toml", config_toml);

  // ---- tokenizers and data ----
  progress.line("scratchformer train: run directory " + dir.string());
  const Tokenizers tok = load_or_train_tokenizers(cfg, static_cast<std::uint64_t>(cfg.train.seed));
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
  check_run_dir(dir, checkpoint_bytes);
  Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                    cfg.train.max_steps, cfg.model.d_model};

  TrainingState st;
  if (options.resume) {
    LoadedCheckpoint ck = load_checkpoint(last_path.string());
    if (ck.src_vocab != tok.src.vocab_size() || ck.tgt_vocab != tok.tgt.vocab_size())
      throw CheckpointError(last_path.string() + ": vocabulary sizes differ from the run's tokenizer");
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
  progress.line("model: " + std::to_string(model.parameter_count()) + " parameters; " +
                std::to_string(batcher.batches_per_epoch()) + " batches per epoch of about " +
                std::to_string(cfg.data.batch_tokens) + " tokens");
  MetricsFile metrics(dir / "metrics.tsv");

  auto save = [&](const fs::path& path) {
    const auto pos = batcher.position();
    st.epoch = pos.epoch;
    st.batch_in_epoch = pos.batch_in_epoch;
    st.dropout_rng = model.dropout_generator().state();
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

  // ---- the loop ----
  SignalScope signals;
  model.train();
  const std::int64_t pad = data::kPadId;
  std::int64_t interval_tokens = 0;
  auto interval_start = Clock::now();
  auto session_start = Clock::now();
  const double elapsed_before = st.elapsed_seconds;
  const std::int64_t start_step = st.step;
  std::string stop_reason = "max_steps reached";
  bool last_was_validation = false;

  while (st.step < cfg.train.max_steps) {
    // one optimizer step = accum_steps batches
    double step_loss = 0, step_nll = NAN;
    std::int64_t step_tokens = 0;
    bool epoch_limit = false;
    const bool log_now = (st.step + 1) % cfg.train.log_every == 0;
    for (std::int64_t micro = 0; micro < cfg.train.accum_steps; ++micro) {
      data::Batch batch;
      if (!batcher.next(batch)) {  // end of an epoch
        if (cfg.train.max_epochs > 0 && batcher.position().epoch >= cfg.train.max_epochs) {
          epoch_limit = true;
          break;
        }
        batcher.next(batch);
      }
      Tensor logits = model.forward(batch.src, batch.tgt_in);  // (B,T,V)
      const std::int64_t V = logits.size(-1);
      Tensor flat_logits = logits.reshape({-1, V});           // (B*T, V)
      Tensor targets = batch.tgt_out.reshape({-1});            // (B*T)
      Tensor loss = cross_entropy(flat_logits, targets, pad, cfg.train.label_smoothing);
      if (cfg.train.accum_steps > 1) loss = div(loss, static_cast<double>(cfg.train.accum_steps));
      loss.backward();
      step_loss += loss.item();
      step_tokens += batch.tgt_tokens;
      if (log_now) {  // the unsmoothed NLL of the same batches, for the log line
        NoGradGuard no_grad;
        const double nll = cross_entropy(flat_logits.detach(), targets, pad, 0.0).item() /
                           static_cast<double>(cfg.train.accum_steps);
        step_nll = micro == 0 ? nll : step_nll + nll;
      }
    }
    if (epoch_limit) {
      stop_reason = "max_epochs reached";
      break;
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
    if (progress.tty()) {
      std::ostringstream os;
      os << "step " << st.step << "/" << cfg.train.max_steps << " | epoch " << batcher.position().epoch + 1 << " | loss "
         << std::fixed << std::setprecision(3) << step_loss << " | lr " << std::scientific << std::setprecision(2) << lr
         << " | " << std::fixed << std::setprecision(0) << tok_per_s << " tok/s | ETA " << format_duration(eta);
      progress.bar(os.str());
    }
    if (log_now) {
      // loss and nll of this step's batches (the same data, so they compare); tokens/s over the
      // interval since the last log line
      metrics.row(st.step, batcher.position().epoch, "train", step_loss, step_nll, lr, tok_per_s, grad_norm, NAN, st.elapsed_seconds);
      if (!progress.tty()) {
        std::ostringstream os;
        os << "step " << st.step << "/" << cfg.train.max_steps << " epoch " << batcher.position().epoch + 1 << " loss " << std::fixed
           << std::setprecision(3) << step_loss << " nll " << step_nll << " ppl " << std::setprecision(2) << std::exp(step_nll)
           << " lr " << std::scientific << std::setprecision(2) << lr << " " << std::fixed << std::setprecision(0) << tok_per_s
           << " tok/s ETA " << format_duration(eta);
        progress.line(os.str());
      }
      interval_tokens = 0;
      interval_start = Clock::now();
    }
    if (st.step % cfg.train.valid_every == 0) {
      last_was_validation = true;
      if (validate()) {
        stop_reason = "no improvement in " + std::to_string(cfg.train.patience) + " validations (train.patience)";
        break;
      }
    }
    if (g_signal != 0) {
      save(last_path);
      const int sig = g_signal;
      progress.line(std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ") at step " + std::to_string(st.step) +
                    "; saved " + last_path.string() + "\nresume with: scratchformer train --config " + cfg.source_path +
                    " --resume");
      return 128 + sig;
    }
  }
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
