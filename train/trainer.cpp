#include "train/trainer.h"

#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/threads.h"
#include "data/batcher.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_average.h"
#include "train/checkpoint/safetensors.h"
#include "train/data_parallel.h"
#include "train/distributed/distributed.h"
#include "train/eval/bleu.h"
#include "train/eval/chrf.h"
#include "train/eval/evaluate.h"
#include "train/norms_by_layer.h"
#include "train/run_log.h"
#include "train/optim/schedule.h"
#include "train/setup.h"
#include "train/task.h"
#include "train/training_data.h"

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

std::unique_ptr<Optimizer> make_optimizer(const TrainSection& t, NamedParameters params) {
  if (t.optimizer == "adam") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, false);
  if (t.optimizer == "adamw") return std::make_unique<Adam>(std::move(params), t.beta1, t.beta2, t.eps, t.weight_decay, true);
  if (t.optimizer == "sgd") return std::make_unique<SGD>(std::move(params), t.momentum, t.weight_decay);
  throw std::invalid_argument("train.optimizer: expected adam, adamw or sgd, got '" + t.optimizer + "'");
}

Schedule make_schedule(const Config& cfg) {
  return Schedule{parse_schedule(cfg.train.schedule), cfg.train.lr,          cfg.train.min_lr,
                  cfg.train.warmup_steps,             cfg.train.max_steps,   cfg.model.d_model};
}

// ---- everything one run holds ----------------------------------------------------------------
struct TrainingRun {
  TrainingRun(const Config& c, const TrainOptions& o) : cfg(c), options(o), schedule(make_schedule(c)) {}
  const Config& cfg;
  const TrainOptions& options;
  fs::path dir, last_path, best_path;
  std::string config_toml;  // the effective config, saved in run.dir and in every checkpoint
  Progress progress;
  std::unique_ptr<Tokenizers> tok;  // set by load_data
  std::unique_ptr<TaskBatches> task;  // data.task: how examples become batches (train/task.h)
  EncodedSplit train_split, valid_split;
  std::unique_ptr<data::Batcher> batcher;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<Optimizer> optimizer;
  Schedule schedule;
  TrainingState st;
  std::unique_ptr<MetricsFile> metrics;
  std::unique_ptr<LayerNormsFile> layer_norms;  // layer_norms.tsv: per-layer weight and gradient norms
  DataParallel parallel;
  DecodeOptions valid_decode;
  std::int64_t start_step = 0;        // st.step when this session started
  std::int64_t last_saved_step = -1;  // the step of the checkpoint-last on disk
  // tokens/s between two log lines
  std::int64_t interval_tokens = 0;  // global (all ranks') target tokens since the last log line
  Clock::time_point interval_start{}, session_start{};
  double interval_allreduce_start = 0, elapsed_before = 0;

  std::int64_t epoch() const { return batcher->position().epoch; }
};

// Paths, the --resume checks, config.toml. Rank 0 alone writes to run.dir.
void prepare_run_dir(TrainingRun& run) {
  const Config& cfg = run.cfg;
  if (cfg.run.threads > 0) set_num_threads(static_cast<int>(cfg.run.threads));
  // data-parallel: mpirun binds each rank to a core, so one thread per rank unless asked otherwise
  else if (world_size() > 1 && !std::getenv("SCRATCHFORMER_NUM_THREADS")) set_num_threads(1);
  run.dir = fs::path(cfg.run.dir);
  run.last_path = run.dir / "checkpoint-last.safetensors";
  run.best_path = run.dir / "checkpoint-best.safetensors";
  if (run.options.resume && !fs::exists(run.last_path))
    throw std::runtime_error("--resume: no checkpoint to resume from at " + run.last_path.string());
  if (!run.options.resume && fs::exists(run.last_path))
    throw std::runtime_error("run.dir " + run.dir.string() +
                             " already holds a run (checkpoint-last.safetensors); pass --resume to continue it "
                             "or set another run.dir (--set run.dir=...)");
  run.config_toml = to_toml(cfg);
  if (is_main()) {
    check_run_dir(run.dir, 0, cfg.run.keep_checkpoints);
    write_text_atomically(run.dir / "config.toml", run.config_toml);
  }
}

// Tokenizers, the train and valid splits, the batcher.
void load_data(TrainingRun& run) {
  const Config& cfg = run.cfg;
  run.progress.line("scratchformer train: run directory " + run.dir.string());
  // data-parallel: rank 0 trains (or loads) the tokenizer into run.dir while the others wait at
  // the barrier; then they load it from there
  if (!is_main()) barrier();
  // a resumed run needs the tokenizer it was trained with: never train a new one silently
  run.tok = std::make_unique<Tokenizers>(run.options.resume
                                             ? load_tokenizers(cfg, cfg.run.dir)
                                             : load_or_train_tokenizers(cfg, static_cast<std::uint64_t>(cfg.train.seed)));
  if (is_main()) barrier();
  const Tokenizers& tok = *run.tok;
  run.progress.line("tokenizer: vocabulary " + std::to_string(tok.src.vocab_size()) +
                    (cfg.data.joint_tokenizer ? " (joint, " + tok.src.model_path() + ")"
                                              : " (source) / " + std::to_string(tok.tgt.vocab_size()) + " (target)"));
  run.task = std::make_unique<TaskBatches>(cfg, tok);
  run.train_split = load_task_split(cfg, tok, "train", run.progress);
  run.valid_split = load_task_split(cfg, tok, "valid", run.progress);
  truncate_split(run.valid_split, cfg.data.max_valid_sentences);
  run.batcher = std::make_unique<data::Batcher>(run.train_split.src, run.train_split.tgt, cfg.data.batch_tokens,
                                                static_cast<std::uint64_t>(cfg.train.seed), true, run.task->rows());
  run.valid_decode.beam = cfg.train.valid_beam;
  run.valid_decode.length_penalty = cfg.train.valid_length_penalty;
}

// The model of model.arch and its optimizer, from the seed.
void build_model(TrainingRun& run) {
  const Config& cfg = run.cfg;
  Generator init_gen(static_cast<std::uint64_t>(cfg.train.seed));
  run.model = nn::make_model(model_config_from(cfg, run.tok->src.vocab_size(), run.tok->tgt.vocab_size()), init_gen);
  run.optimizer = make_optimizer(cfg.train, run.model->named_parameters());
  const std::int64_t checkpoint_bytes = run.model->parameter_count() * 4 * 3;  // weights + Adam's m and v
  if (is_main()) check_run_dir(run.dir, checkpoint_bytes, cfg.run.keep_checkpoints);
}

// --resume: weights, optimizer state, step, data position and dropout stream from checkpoint-last.
void restore(TrainingRun& run) {
  const std::string path = run.last_path.string();
  LoadedCheckpoint ck = load_checkpoint(path);
  if (ck.src_vocab != run.tok->src.vocab_size() || ck.tgt_vocab != run.tok->tgt.vocab_size())
    throw CheckpointError(path + ": vocabulary sizes differ from the run's tokenizer");
  check_checkpoint_dtypes(ck, *run.model, path);
  try {
    run.model->load_state_dict(ck.model);
    run.optimizer->load_state(ck.optimizer);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(path + " does not match the config: " + e.what());
  }
  run.optimizer->set_steps(ck.optimizer_steps);
  run.st = ck.state;
  run.model->dropout_generator().set_state(run.st.dropout_rng);
  run.batcher->set_position({run.st.epoch, run.st.batch_in_epoch});
  run.progress.line("resumed from " + path + " at step " + std::to_string(run.st.step));
}

// Everything up to the first step; the run's lines on the terminal say what was built.
void start_run(TrainingRun& run) {
  prepare_run_dir(run);
  load_data(run);
  build_model(run);
  if (run.options.resume) restore(run);
  run.parallel.seed_dropout(run.model->dropout_generator());
  if (run.parallel.active()) run.progress.line(run.parallel.describe(run.cfg.data.batch_tokens, run.cfg.train.accum_steps));
  run.progress.line("model: " + std::to_string(run.model->parameter_count()) + " parameters; " +
                    std::to_string(run.batcher->batches_per_epoch()) + " batches per epoch of about " +
                    std::to_string(run.cfg.data.batch_tokens) + " tokens");
  if (matmul_precision() == MatmulPrecision::Bf16)
    run.progress.line(std::string("precision: bf16 matrix products on ") + bf16_unit_name(bf16_unit()) + " (oneDNN " +
                      bf16_kernel_name() + "), float32 weights, optimizer, norms, softmax and loss");
  run.metrics = std::make_unique<MetricsFile>(run.dir / "metrics.tsv", is_main());
  run.layer_norms = std::make_unique<LayerNormsFile>(run.dir / "layer_norms.tsv", is_main());
  run.start_step = run.st.step;
  run.last_saved_step = run.options.resume ? run.st.step : -1;
  run.elapsed_before = run.st.elapsed_seconds;
  if (run.options.hooks && is_main()) run.options.hooks->begin();
}

// checkpoint-last (keeping the last run.keep_checkpoints, checkpoint.h) or checkpoint-best.
void save(TrainingRun& run, const fs::path& path) {
  if (!is_main()) return;  // data-parallel: rank 0 alone writes checkpoints
  const auto pos = run.batcher->position();
  run.st.epoch = pos.epoch;
  run.st.batch_in_epoch = pos.batch_in_epoch;
  run.st.dropout_rng = run.model->dropout_generator().state();
  const auto src_vocab = run.tok->src.vocab_size(), tgt_vocab = run.tok->tgt.vocab_size();
  if (path == run.last_path) {
    save_last_checkpoint(run.dir.string(), run.cfg.run.keep_checkpoints, run.last_saved_step, *run.model,
                         run.optimizer.get(), run.st, run.config_toml, src_vocab, tgt_vocab);
    run.last_saved_step = run.st.step;
    return;
  }
  save_checkpoint(path.string(), *run.model, run.optimizer.get(), run.st, run.config_toml, src_vocab, tgt_vocab);
}

// The valid split's loss and perplexity, and what the task measures besides (BLEU, accuracy).
struct Validation {
  TaskMetrics metrics;
  double bleu = NAN;
  // what checkpoint-best keeps the best of (larger is better)
  double score(const std::string& best_metric) const {
    if (best_metric == "bleu") return bleu;
    if (best_metric == "accuracy") return metrics.accuracy;
    return -metrics.nll;
  }
};

Validation measure_valid(TrainingRun& run) {
  const Config& cfg = run.cfg;
  Validation v;
  v.metrics = evaluate_task(*run.model, *run.task, run.valid_split, cfg.data.batch_tokens, cfg.train.label_smoothing);
  if (cfg.data.task == "translation")
    v.bleu = evaluate_bleu(*run.model, *run.tok, run.valid_split.src, run.valid_split.tgt_text, run.valid_decode,
                           cfg.data.bleu_tokenize).score;
  if (run.options.hooks && is_main()) {
    run.model->eval();
    run.options.hooks->after_validation(*run.model, run.st.step);
  }
  run.model->train();
  return v;
}

// "loss 2.104 nll 1.874 ppl 6.52 BLEU 31.20" / "... accuracy 61.3%"
std::string describe_metrics(const TaskMetrics& m, double bleu) {
  std::ostringstream os;
  os << "loss " << std::fixed << std::setprecision(3) << m.loss << " nll " << m.nll << " ppl " << std::setprecision(2)
     << std::exp(m.nll);
  if (!std::isnan(bleu)) os << " BLEU " << bleu;
  if (!std::isnan(m.accuracy)) os << " accuracy " << std::setprecision(1) << 100 * m.accuracy << "%";
  return os.str();
}

// Loss, perplexity and BLEU or accuracy on the valid split; saves checkpoint-best when it
// improved and checkpoint-last always. Returns true when patience ran out.
bool validate(TrainingRun& run) {
  const auto t0 = Clock::now();
  const Config& cfg = run.cfg;
  const Validation v = measure_valid(run);
  TrainingState& st = run.st;
  const double metric = v.score(cfg.train.best_metric);
  const bool improved = !st.has_best || metric > st.best_metric;
  run.progress.line("valid step " + std::to_string(st.step) + ": " + describe_metrics(v.metrics, v.bleu) + " (" +
                    format_duration(std::chrono::duration<double>(Clock::now() - t0).count()) + ")" +
                    (improved ? " *best*" : ""));
  run.metrics->row(st.step, run.epoch(), "valid", v.metrics.loss, v.metrics.nll, NAN, NAN, NAN, v.bleu, st.elapsed_seconds,
                   NAN, v.metrics.accuracy);
  if (improved) {
    st.best_metric = metric;
    st.has_best = true;
    st.bad_validations = 0;
    save(run, run.best_path);
  } else {
    ++st.bad_validations;
  }
  save(run, run.last_path);
  return cfg.train.patience > 0 && st.bad_validations >= cfg.train.patience;
}

// ---- one step --------------------------------------------------------------------------------

// The next training batch of the task (train/task.h); at the end of an epoch the first of the
// next, unless train.max_epochs is reached (then false). `epoch` receives the batch's epoch.
bool next_batch(TrainingRun& run, data::Batch& batch, std::int64_t& epoch) {
  std::vector<std::int64_t> indices;
  if (!run.batcher->next_indices(indices)) {
    if (run.cfg.train.max_epochs > 0 && run.epoch() >= run.cfg.train.max_epochs) return false;
    if (!run.batcher->next_indices(indices)) return false;
  }
  epoch = run.epoch();
  batch = run.task->make(run.train_split, indices, epoch);
  return true;
}

// logits: (B,T,V), targets: (B,T) -> () the label-smoothed cross-entropy per target token,
// scaled by this rank's share of the batch and divided over the accumulated micro-batches.
Tensor step_loss(const TrainingRun& run, const Tensor& logits, const Tensor& targets, double share) {
  const std::int64_t V = logits.size(-1);
  Tensor loss = cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}), run.task->ignore_index(), run.cfg.train.label_smoothing);
  if (share != 1.0) loss = mul(loss, share);
  if (run.cfg.train.accum_steps > 1) loss = div(loss, static_cast<double>(run.cfg.train.accum_steps));
  return loss;
}

// The unsmoothed NLL of the same logits, for the log line (no graph).
double unsmoothed_nll(const TrainingRun& run, const Tensor& logits, const Tensor& targets, double share) {
  NoGradGuard no_grad;
  const std::int64_t V = logits.size(-1);
  return cross_entropy(logits.reshape({-1, V}).detach(), targets.reshape({-1}), run.task->ignore_index(), 0.0).item() * share /
         static_cast<double>(run.cfg.train.accum_steps);
}

struct StepResult {
  double loss = 0, nll = 0;  // nll only when asked for (log steps)
  double grad_norm = 0, lr = 0;
  std::int64_t tokens = 0;   // target tokens of the step's global batches
  bool epoch_limit = false;  // train.max_epochs reached: no step taken
  bool skipped = false;      // non-finite loss or gradient norm: no step taken
  std::vector<LayerNorms> layers;  // log steps: per-layer norms, gradients before clipping
};

// The hooks (--trace, --dump-graph) see the first micro-batch of each step, on rank 0.
StepHooks* hooks_for(const TrainingRun& run, std::int64_t micro) {
  return micro == 0 && is_main() ? run.options.hooks : nullptr;
}

// One optimizer step, as the lecture writes it: for each of accum_steps micro-batches forward,
// loss, backward (the gradients add up); then clip the gradient norm and step.
StepResult train_step(TrainingRun& run, bool with_nll) {
  StepResult r;
  const std::int64_t session_step = run.st.step - run.start_step, step = run.st.step + 1;
  for (std::int64_t micro = 0; micro < run.cfg.train.accum_steps; ++micro) {
    data::Batch batch;
    std::int64_t epoch = 0;
    if (!next_batch(run, batch, epoch)) return r.epoch_limit = true, r;
    r.tokens += batch.tgt_tokens;                                         // the global batch
    const double share = run.parallel.take_shard(batch, [&](const std::vector<std::int64_t>& rows) {
      return run.task->make(run.train_split, rows, epoch);                // this rank's rows
    });
    if (batch.rows() == 0) continue;  // more ranks than rows: this rank adds zero gradients
    StepHooks* hooks = hooks_for(run, micro);
    if (hooks) hooks->before_forward(*run.model, session_step, step);
    const Tensor logits = run.model->forward(batch.src, batch.tgt_in);   // (B,T,V)
    const Tensor loss = step_loss(run, logits, batch.tgt_out, share);    // ()
    if (hooks) hooks->before_backward(loss, *run.model, session_step, step);
    loss.backward();                                                      // .grad += dloss/dparam
    if (hooks) hooks->after_backward(session_step, step);
    r.loss += loss.item();
    if (with_nll) r.nll += unsmoothed_nll(run, logits, batch.tgt_out, share);
  }
  run.parallel.sum(run.optimizer->params(), r.loss, r.nll);  // data-parallel: all ranks' gradients
  if (with_nll && is_main()) r.layers = norms_by_layer(run.optimizer->params());
  r.grad_norm = clip_grad_norm(run.optimizer->params(), run.cfg.train.clip_norm);
  r.skipped = !std::isfinite(r.loss) || !std::isfinite(r.grad_norm);
  if (!r.skipped) r.lr = run.schedule.at(step), run.optimizer->step(r.lr);
  run.optimizer->zero_grad();
  return r;
}

// ---- after a step ------------------------------------------------------------------------------

// A skipped update: said on the terminal and in metrics.tsv. Returns true when too many came in
// a row (train.max_nonfinite): the run stops.
bool report_skipped(TrainingRun& run, const StepResult& r) {
  TrainingState& st = run.st;
  ++st.nonfinite_streak;
  run.progress.line("step " + std::to_string(st.step + 1) + ": non-finite " + (std::isfinite(r.loss) ? "gradient norm" : "loss") +
                    ", update skipped (" + std::to_string(st.nonfinite_streak) + " in a row)");
  run.metrics->row(st.step + 1, run.epoch(), "skipped", r.loss, NAN, NAN, NAN, r.grad_norm, NAN, st.elapsed_seconds);
  if (st.nonfinite_streak < run.cfg.train.max_nonfinite) return false;
  run.progress.line("stopping: " + std::to_string(st.nonfinite_streak) +
                    " non-finite steps in a row (train.max_nonfinite); the last good checkpoint is " + run.last_path.string() +
                    ". Try a lower train.lr or train.clip_norm.");
  return true;
}

// Tokens per second over the interval since the last log line, the run's ETA, and (data-parallel)
// the share of that interval spent in the gradient allreduce.
struct StepRates {
  double tok_per_s = 0, eta = 0, allreduce_share = NAN;
};

StepRates step_rates(const TrainingRun& run) {
  StepRates rates;
  const double now = std::chrono::duration<double>(Clock::now() - run.session_start).count();
  const double per_step = now / static_cast<double>(run.st.step - run.start_step);
  rates.eta = per_step * static_cast<double>(run.cfg.train.max_steps - run.st.step);
  const double interval_s = std::chrono::duration<double>(Clock::now() - run.interval_start).count();
  if (interval_s > 0) rates.tok_per_s = static_cast<double>(run.interval_tokens) / interval_s;
  if (run.parallel.active() && interval_s > 0)
    rates.allreduce_share = (run.parallel.allreduce_seconds() - run.interval_allreduce_start) / interval_s;
  return rates;
}

// The terminal's progress bar after every step.
void show_progress_bar(TrainingRun& run, const StepResult& r, const StepRates& rates) {
  std::ostringstream os;
  os << "step " << run.st.step << "/" << run.cfg.train.max_steps << " | epoch " << run.epoch() + 1 << " | loss "
     << std::fixed << std::setprecision(3) << r.loss << " | lr " << std::scientific << std::setprecision(2) << r.lr
     << " | " << std::fixed << std::setprecision(0) << rates.tok_per_s << " tok/s | ETA " << format_duration(rates.eta);
  if (run.parallel.active())  // data-parallel: tokens/s of all ranks together
    os << " | " << world_size() << " ranks, allreduce " << std::setprecision(1) << 100 * rates.allreduce_share << "%";
  run.progress.bar(os.str());
}

// A log step: metrics.tsv's row, the layer norms, and without a terminal a log line. The loss and
// nll are this step's batches' (the same data, so they compare); tokens/s are over the interval.
void write_log(TrainingRun& run, const StepResult& r, const StepRates& rates) {
  const TrainingState& st = run.st;
  run.metrics->row(st.step, run.epoch(), "train", r.loss, r.nll, r.lr, rates.tok_per_s, r.grad_norm, NAN,
                   st.elapsed_seconds, rates.allreduce_share);
  run.layer_norms->rows(st.step, r.layers);
  if (!run.progress.tty()) {
    std::ostringstream os;
    os << "step " << st.step << "/" << run.cfg.train.max_steps << " epoch " << run.epoch() + 1 << " loss " << std::fixed
       << std::setprecision(3) << r.loss << " nll " << r.nll << " ppl " << std::setprecision(2) << std::exp(r.nll) << " lr "
       << std::scientific << std::setprecision(2) << r.lr << " " << std::fixed << std::setprecision(0) << rates.tok_per_s
       << " tok/s ETA " << format_duration(rates.eta);
    if (run.parallel.active())  // tokens/s above are all ranks' together
      os << " (" << world_size() << " ranks, allreduce " << std::setprecision(1) << 100 * rates.allreduce_share
         << "% of the time)";
    run.progress.line(os.str());
  }
  run.interval_tokens = 0;
  run.interval_start = Clock::now();
  run.interval_allreduce_start = run.parallel.allreduce_seconds();
}

// After each step: the elapsed time, the progress bar on a terminal, and on log steps the log.
void log_step(TrainingRun& run, const StepResult& r, bool log_now) {
  run.st.elapsed_seconds = run.elapsed_before + std::chrono::duration<double>(Clock::now() - run.session_start).count();
  if (!run.progress.tty() && !log_now) return;
  const StepRates rates = step_rates(run);  // one measurement for the bar and the log row
  if (run.progress.tty()) show_progress_bar(run, r, rates);
  if (log_now) write_log(run, r, rates);
}

// Log every log_every steps, and also the first steps of a session (steps 1 and 10), so a run
// without a terminal shows signs of life before the first full interval.
bool is_log_step(const TrainingRun& run) {
  const std::int64_t session_step = run.st.step - run.start_step + 1, every = run.cfg.train.log_every;
  return (run.st.step + 1) % every == 0 || ((session_step == 1 || session_step == 10) && session_step < every);
}

// Ctrl-C / SIGTERM on any rank: save checkpoint-last and say how to resume. Returns the exit
// status, or 0 when no signal came.
int stop_on_signal(TrainingRun& run) {
  const int sig = run.parallel.max_over_ranks(g_signal);
  if (sig == 0) return 0;
  save(run, run.last_path);
  run.progress.line(std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ") at step " +
                    std::to_string(run.st.step) + "; saved " + run.last_path.string() +
                    "\nresume with: scratchformer train --config " + run.cfg.source_path + " --resume");
  return 128 + sig;
}

// train.max_minutes of training time have passed (on every rank: rank 0's clock decides).
bool out_of_time(TrainingRun& run) {
  if (run.cfg.train.max_minutes <= 0) return false;
  const int over = is_main() && run.st.elapsed_seconds >= 60 * run.cfg.train.max_minutes ? 1 : 0;
  return run.parallel.max_over_ranks(over) != 0;
}

// run.average_last = K: the last K kept checkpoints averaged into checkpoint-average
// (train/checkpoint/checkpoint_average.h), with one line saying which.
void average_last_checkpoints(TrainingRun& run) {
  if (run.cfg.run.average_last <= 0) return;
  const std::vector<std::string> kept = last_kept_checkpoints(run.dir.string(), run.cfg.run.average_last);
  const std::string out = (run.dir / kAverageCheckpointName).string();
  run.progress.line(describe_average(average_checkpoints(kept, out), out));
}

// Loads the weights the test set is measured with and returns their name: checkpoint-average with
// run.average_last, else checkpoint-best; else the last weights stay.
std::string load_test_weights(TrainingRun& run) {
  const bool averaged = run.cfg.run.average_last > 0;
  const fs::path path = averaged ? run.dir / kAverageCheckpointName : run.best_path;
  if (!fs::exists(path)) return "last weights";
  run.model->load_state_dict(load_model_checkpoint(path.string()).model);
  return averaged ? "checkpoint-average" : "checkpoint-best";
}

// The test split with the best (or the averaged) checkpoint: BLEU, chrF and a few sample
// translations, or the task's loss, perplexity and accuracy.
void final_test(TrainingRun& run) {
  const Config& cfg = run.cfg;
  if (!has_test_split(cfg)) return;
  const std::string weights = load_test_weights(run);
  EncodedSplit test = load_task_split(cfg, *run.tok, "test", run.progress);
  if (cfg.data.task != "translation") {
    const TaskMetrics m = evaluate_task(*run.model, *run.task, test, cfg.data.batch_tokens, cfg.train.label_smoothing);
    run.progress.line("test (" + weights + "): " + describe_metrics(m, NAN));
    run.metrics->row(run.st.step, run.epoch(), "test", m.loss, m.nll, NAN, NAN, NAN, NAN, run.st.elapsed_seconds, NAN,
                     m.accuracy);
    return;
  }
  std::vector<std::string> hyps;
  const BleuResult bleu =
      evaluate_bleu(*run.model, *run.tok, test.src, test.tgt_text, run.valid_decode, cfg.data.bleu_tokenize, &hyps);
  run.progress.line("test (" + weights + "): " + format_bleu(bleu));
  run.progress.line("test (" + weights + "): " + format_chrf(corpus_chrf(hyps, test.tgt_text)));
  for (std::size_t i = 0; i < std::min<std::size_t>(5, hyps.size()); ++i)
    run.progress.line("  src: " + test.src_text[i] + "\n  ref: " + test.tgt_text[i] + "\n  hyp: " + hyps[i]);
  run.metrics->row(run.st.step, run.epoch(), "test", NAN, NAN, NAN, NAN, NAN, bleu.score, run.st.elapsed_seconds);
}

// After the loop: a last validation (unless the last step had one), then the test set.
int finish(TrainingRun& run, std::string stop_reason, bool last_was_validation) {
  if (!is_main()) return 0;  // data-parallel: the rest (validation, test BLEU) is rank 0's
  if (!last_was_validation && run.st.step > run.start_step && validate(run)) stop_reason += "; patience ran out";
  if (run.st.step == run.start_step && !fs::exists(run.last_path)) save(run, run.last_path);
  run.progress.line("training stopped: " + stop_reason + " after " + std::to_string(run.st.step) + " steps, " +
                    format_duration(run.st.elapsed_seconds) + " of training");
  average_last_checkpoints(run);
  final_test(run);
  return 0;
}

}  // namespace

int train(const Config& cfg, const TrainOptions& options) {
  // train.precision = "bf16": every matrix product of the run (training, validation, the test)
  // in bf16 with float32 sums, like torch.autocast; refused here, before anything is written, on a
  // CPU without bf16 units
  const MatmulPrecisionScope precision(parse_matmul_precision(cfg.train.precision), "train.precision = \"bf16\"");
  TrainingRun run(cfg, options);
  start_run(run);
  SignalScope signals;
  run.model->train();
  run.session_start = run.interval_start = Clock::now();
  run.interval_allreduce_start = run.parallel.allreduce_seconds();
  std::string stop_reason = "max_steps reached";
  bool last_was_validation = false;
  while (run.st.step < cfg.train.max_steps) {
    const bool log_now = is_log_step(run);
    const StepResult r = train_step(run, log_now);
    if (r.epoch_limit) {
      stop_reason = "max_epochs reached";
      break;
    }
    if (r.skipped) {
      if (report_skipped(run, r)) return 1;
      continue;
    }
    run.st.nonfinite_streak = 0;
    ++run.st.step;
    run.st.tokens_seen += r.tokens;
    run.interval_tokens += r.tokens;
    last_was_validation = false;
    log_step(run, r, log_now);
    if (run.st.step % cfg.train.valid_every == 0) {
      last_was_validation = true;
      run.parallel.check_in_sync(run.optimizer->params());  // data-parallel: the ranks still agree
      // data-parallel: rank 0 validates (and saves); the others wait for its patience verdict
      if (run.parallel.max_over_ranks(is_main() && validate(run) ? 1 : 0) != 0) {
        stop_reason = "no improvement in " + std::to_string(cfg.train.patience) + " validations (train.patience)";
        break;
      }
    }
    if (const int status = stop_on_signal(run); status != 0) return status;
    if (out_of_time(run)) {
      stop_reason = "max_minutes reached (" + format_duration(60 * cfg.train.max_minutes) + " of training)";
      break;
    }
  }
  return finish(run, stop_reason, last_was_validation);
}

}  // namespace sf::train
