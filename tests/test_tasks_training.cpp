// The tasks of train/task.h (lm, mlm, classify, decoder-only translation) from the config to the
// command line:
//   config      data.task against model.arch, the files each task reads, labels, best_metric,
//               joint_tokenizer for a decoder-only translation, the to_toml round trip
//   tokenizer   task symbols (<sep>, <mask>, ...) get ids 4, 5, ...; text never produces them
//   batcher     Rows::Joined counts a decoder-only translation row as S + T + 2 tokens
//   batches     TaskBatches: masked-LM masks a function of (seed, epoch, row) only; classify
//               labels (0 is a class, ignore_index -100); count_correct on hand-made logits
//   data        load_classify_split's errors, each naming the file and the line
//   end to end  a tiny run of each task through `scratchformer train` (200 generated lines, D 32,
//               60 steps): metrics.tsv, the valid loss going down; then generate, fill-mask,
//               classify, translate and eval on its checkpoint, and the one-line errors of a
//               command given a checkpoint of another task or bad generate options.
//
// The tokenizer and batcher cases test data/ alone (tagged [data]) but live here, beside the tasks
// that need them, and so run in train_tests. The runs train once per process: a static fixture (task_run) shared by the SECTIONs of a
// TEST_CASE, each of which the test framework enters in a fresh pass over the case.
//
// Letters: B rows, S source length, T target length, V vocabulary, C classes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "run_util.h"
#include "test_util.h"
#include "train/config.h"
#include "train/run_log.h"
#include "train/task.h"
#include "train/training_data.h"

using namespace sf;
using namespace sf::test;  // TempDir, read_file, run_cli, check_one_line_error, quoted: tests/*_util.h
using Catch::Contains;
using Ids = std::vector<std::int64_t>;

namespace {

namespace fs = std::filesystem;

// ---- tiny text, made here ---------------------------------------------------------------------

// Twelve two-letter words: a 40-piece vocabulary holds them whole (plus letters and task symbols).
const std::vector<std::string> kWords = {"lo", "be", "co", "da", "fi", "gu", "ha", "ki", "mo", "nu", "pe", "ra"};
constexpr int kVocabSize = 40;

// `n` words from `first`, each the next one in kWords after the one before (cyclic): a sequence
// an lm or an mlm learns within a few dozen steps.
std::string cyclic_words(std::size_t first, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += (i ? " " : "") + kWords[(first + i) % kWords.size()];
  return s;
}

std::size_t draw(Generator& gen, std::size_t lo, std::size_t hi) {  // uniform in [lo, hi]
  return lo + static_cast<std::size_t>(gen.randint(hi - lo + 1));
}

std::vector<std::string> random_words(Generator& gen, std::size_t lo, std::size_t hi) {
  std::vector<std::string> w(draw(gen, lo, hi));
  for (auto& x : w) x = kWords[gen.randint(kWords.size())];
  return w;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// lm, mlm: `n` cyclic lines of 4 to 9 words, one per line.
std::string cyclic_text(std::size_t n, std::uint64_t seed) {
  Generator gen(seed);
  std::string text;
  for (std::size_t i = 0; i < n; ++i) text += cyclic_words(gen.randint(kWords.size()), draw(gen, 4, 9)) + "\n";
  return text;
}

// classify: label<TAB>text lines of 3 to 8 random words, labelled "yes" when the words hold "ki"
// (about 40% of them), else "no".
std::string labelled_text(std::size_t n, std::uint64_t seed) {
  Generator gen(seed);
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    const auto w = random_words(gen, 3, 8);
    const bool has_ki = std::find(w.begin(), w.end(), "ki") != w.end();
    text += std::string(has_ki ? "yes" : "no") + "\t" + joined(w) + "\n";
  }
  return text;
}

// translation: sources of 2 to 5 random words, targets the same words (a copy task), in two files.
std::pair<std::string, std::string> copy_pairs(std::size_t n, std::uint64_t seed) {
  Generator gen(seed);
  std::string src, tgt;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string line = joined(random_words(gen, 2, 5));
    src += line + "\n", tgt += line + "\n";
  }
  return {src, tgt};
}

// ---- a tiny run of each task ------------------------------------------------------------------

// The config of a tiny run in its folder: D 32, H 4, F 64, no dropout, max_len 32, a 40-piece
// vocabulary, 256-token batches; Adam at 3e-3 (cosine, 10 warm-up steps) for 60 steps,
// validating every 10; one thread. `model`, `data`, `train` add the task's own lines.
std::string tiny_toml(const std::string& model, const std::string& data, const std::string& train) {
  return "[model]\nd_model = 32\nn_heads = 4\nd_ff = 64\ndropout = 0.0\nmax_len = 32\n" + model +
         "\n[data]\ntokenizer_vocab_size = " + std::to_string(kVocabSize) + "\nbatch_tokens = 256\n" + data +
         "\n[train]\nlr = 3e-3\nschedule = \"cosine\"\nwarmup_steps = 10\nmax_steps = 60\nmin_lr = 1e-4\n"
         "label_smoothing = 0.0\nlog_every = 10\nvalid_every = 10\n" + train +
         "\n[run]\ndir = \"run\"\nthreads = 1\n";
}

// Writes the data and config of `task` ("lm", "mlm", "classify", "translation") into `dir` and
// returns the config's path. lm and classify have a test file too (mlm and translation none).
std::string write_task_files(const TempDir& dir, const std::string& task) {
  const std::string text_files = "train_file = \"train.txt\"\nvalid_file = \"valid.txt\"\n";
  const std::string test_file = "test_file = \"test.txt\"\n";
  std::string toml;
  if (task == "lm" || task == "mlm") {
    dir.write(task + "/train.txt", cyclic_text(200, 1));
    dir.write(task + "/valid.txt", cyclic_text(60, 2));
    dir.write(task + "/test.txt", cyclic_text(30, 8));
    toml = task == "lm" ? tiny_toml("arch = \"decoder-only\"\nn_kv_heads = 2\ndecoder_layers = 2\npositional = \"rope\"",
                                    "task = \"lm\"\n" + text_files + test_file, "best_metric = \"loss\"")
                        : tiny_toml("arch = \"encoder-only\"\nencoder_layers = 2\npositional = \"learned\"",
                                    "task = \"mlm\"\n" + text_files, "best_metric = \"accuracy\"");
  } else if (task == "classify") {
    dir.write(task + "/train.txt", labelled_text(200, 3));
    dir.write(task + "/valid.txt", labelled_text(60, 4));
    dir.write(task + "/test.txt", labelled_text(30, 9));
    toml = tiny_toml("arch = \"encoder-only\"\nencoder_layers = 1\npooling = \"mean\"",
                     "task = \"classify\"\nlabels = \"no,yes\"\n" + text_files + test_file, "best_metric = \"accuracy\"");
  } else {
    const auto [train_src, train_tgt] = copy_pairs(200, 5);
    const auto [valid_src, valid_tgt] = copy_pairs(40, 6);
    dir.write(task + "/train.src", train_src), dir.write(task + "/train.tgt", train_tgt);
    dir.write(task + "/valid.src", valid_src), dir.write(task + "/valid.tgt", valid_tgt);
    toml = tiny_toml("arch = \"decoder-only\"\ndecoder_layers = 2",
                     "task = \"translation\"\ntrain_src = \"train.src\"\ntrain_tgt = \"train.tgt\"\n"
                     "valid_src = \"valid.src\"\nvalid_tgt = \"valid.tgt\"\n",
                     "best_metric = \"loss\"");
  }
  return dir.write(task + "/config.toml", toml);
}

struct TaskRun {
  std::string dir;         // the run directory
  std::string checkpoint;  // its checkpoint-best.safetensors
  CliResult train;         // what `scratchformer train` said
};

// The folder every run of this process lives in (removed at exit).
const TempDir& runs_folder() {
  static const TempDir folder("sf_tasks");
  return folder;
}

// The run of `task`, trained on first use (once per process) by `scratchformer train`.
const TaskRun& task_run(const std::string& task) {
  static std::map<std::string, TaskRun> runs;
  if (!runs.count(task)) {
    const TempDir& folder = runs_folder();
    const std::string config = write_task_files(folder, task);
    TaskRun r;
    r.dir = folder / (task + "/run");
    r.checkpoint = r.dir + "/checkpoint-best.safetensors";
    r.train = run_cli("train --config " + quoted(config), folder);
    runs[task] = r;
  }
  const TaskRun& r = runs.at(task);
  INFO(task << " training stdout: " << r.train.out << "\nstderr: " << r.train.err);
  REQUIRE(r.train.status == 0);
  REQUIRE(fs::exists(r.checkpoint));
  return r;
}

// ---- metrics.tsv -------------------------------------------------------------------------------

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    fields.push_back(line.substr(start, tab - start));
  fields.push_back(line.substr(start));
  return fields;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The columns of metrics.tsv (train/run_log.h MetricsFile::kHeader).
constexpr std::size_t kStep = 0, kKind = 2, kLoss = 3, kNll = 4, kPpl = 5, kBleu = 9, kAccuracy = 12, kColumns = 13;

struct MetricsRows {
  std::vector<double> valid_losses;  // in order
  std::size_t test_rows = 0;
};

// Checks every row of the run's metrics.tsv (13 fields, a known kind, finite losses) and returns
// the losses of its valid rows. `accuracy`: the accuracy column is filled in valid and test rows
// (mlm, classify), else empty; `bleu`: the BLEU column is filled in valid rows (translation).
MetricsRows checked_metrics(const TaskRun& run, bool accuracy, bool bleu) {
  const auto lines = lines_of(read_file(run.dir + "/metrics.tsv"));
  REQUIRE(lines.size() > 1);
  CHECK(lines[0] == train::MetricsFile::kHeader);
  MetricsRows rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    INFO("metrics.tsv line " << i + 1 << ": " << lines[i]);
    const auto f = split_tabs(lines[i]);
    REQUIRE(f.size() == kColumns);
    CHECK(std::stoll(f[kStep]) > 0);
    CHECK((f[kKind] == "train" || f[kKind] == "valid" || f[kKind] == "test"));
    const double loss = std::stod(f[kLoss]);
    CHECK((std::isfinite(loss) && loss >= 0));
    if (f[kKind] == "train") continue;
    CHECK(std::abs(std::stod(f[kPpl]) - std::exp(std::stod(f[kNll]))) <= 1e-4 * std::stod(f[kPpl]));  // 6 digits
    CHECK(f[kAccuracy].empty() == !accuracy);
    if (accuracy) CHECK((std::stod(f[kAccuracy]) >= 0 && std::stod(f[kAccuracy]) <= 1));
    if (f[kKind] == "test") {
      ++rows.test_rows;
      continue;
    }
    CHECK(f[kBleu].empty() == !bleu);
    rows.valid_losses.push_back(loss);
  }
  return rows;
}

// The run finished, validated 6 times (every 10 of 60 steps), and its last valid loss is below
// the first one (training lowers it by far more than the few percent of noise between
// validations); a run with a test file has one test row.
void check_training(const TaskRun& run, bool accuracy, bool bleu, bool test) {
  INFO("training stdout: " << run.train.out);
  const MetricsRows rows = checked_metrics(run, accuracy, bleu);
  CHECK(rows.test_rows == (test ? 1u : 0u));
  const std::vector<double>& losses = rows.valid_losses;
  REQUIRE(losses.size() == 6);
  INFO("first valid loss " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() < losses.front());
  CHECK(fs::exists(run.dir + "/spm.model"));
  CHECK(fs::exists(run.dir + "/checkpoint-last.safetensors"));
  CHECK_FALSE(fs::exists(run.dir + "/tokenizer-text.tmp"));  // classify's tokenizer text, removed
}

// The line of `text` that starts with `prefix` ("" when none does).
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (const auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// `eval --checkpoint ck --input file`: the metrics line "loss L nll N ppl P [accuracy A%] (...)",
// with ppl = exp(nll) and the accuracy present exactly when `accuracy`.
void check_eval(const TaskRun& run, const std::string& input, bool accuracy) {
  const CliResult r = run_cli("eval --checkpoint " + quoted(run.checkpoint) + " --input " + quoted(input), runs_folder());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  const std::string line = line_starting(r.out, "loss ");
  std::smatch m;
  REQUIRE(std::regex_match(line, m, std::regex(R"(loss (\S+) nll (\S+) ppl (\S+)( accuracy (\S+)%)? \((\d+) .*\))")));
  CHECK(std::stod(m[1]) >= 0);
  CHECK(std::abs(std::stod(m[3]) - std::exp(std::stod(m[2]))) <= 1e-4 * std::stod(m[3]));
  CHECK(m[4].matched == accuracy);
  CHECK(std::stoll(m[6]) > 0);
}

}  // namespace

// ---- 1. config ---------------------------------------------------------------------------------

namespace {

// A config of `task` and `arch` with the given [data] lines (and more [model]/[train] lines).
std::string task_config(const std::string& task, const std::string& arch, const std::string& data,
                        const std::string& model = "", const std::string& train = "") {
  return "[model]\narch = \"" + arch + "\"\n" + model + "\n[data]\ntask = \"" + task + "\"\n" + data +
         "\n[train]\n" + train + "\n[run]\ndir = \"run\"\n";
}
const std::string kTextFiles = "train_file = \"train.txt\"\nvalid_file = \"valid.txt\"\n";
const std::string kPairFiles =
    "train_src = \"a.de\"\ntrain_tgt = \"a.en\"\nvalid_src = \"b.de\"\nvalid_tgt = \"b.en\"\n";

// Loading `text` must throw one ConfigError line containing each of `parts`.
void require_task_error(const std::string& text, const std::vector<std::string>& parts) {
  TempDir dir;
  const std::string path = dir.write("task.toml", text);
  INFO(text);
  REQUIRE_THROWS_AS(train::load_config(path), train::ConfigError);
  try {
    train::load_config(path);
  } catch (const train::ConfigError& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK_THAT(what, Contains(path));
    for (const auto& part : parts) CHECK_THAT(what, Contains(part));
  }
}

}  // namespace

TEST_CASE("a task that does not fit model.arch is a config error naming both", "[config][tasks][errors]") {
  const std::vector<std::pair<std::string, std::string>> mismatches = {
      {"lm", "encoder-decoder"},      {"lm", "encoder-only"},         {"mlm", "decoder-only"},
      {"mlm", "encoder-decoder"},     {"classify", "decoder-only"},   {"classify", "encoder-decoder"},
      {"translation", "encoder-only"}};
  for (const auto& [task, arch] : mismatches) {
    const bool translation = task == "translation";
    const std::string extra = task == "classify" ? "labels = \"a,b\"\n" : "";
    const std::string metric = translation ? "" : task == "lm" ? "best_metric = \"loss\"" : "best_metric = \"accuracy\"";
    require_task_error(task_config(task, arch, (translation ? kPairFiles : kTextFiles) + extra, "", metric),
                       {"data.task", "\"" + task + "\"", "model.arch is \"" + arch + "\""});
  }
  // and the ones that fit load
  TempDir dir;
  CHECK_NOTHROW(train::load_config(dir.write("lm.toml", task_config("lm", "decoder-only", kTextFiles, "", "best_metric = \"loss\""))));
  CHECK_NOTHROW(train::load_config(dir.write("tr.toml", task_config("translation", "decoder-only", kPairFiles))));
}

TEST_CASE("each task requires its own files, labels and best metric", "[config][tasks][errors]") {
  const std::string loss = "best_metric = \"loss\"", accuracy = "best_metric = \"accuracy\"";
  SECTION("lm without train_file") {
    require_task_error(task_config("lm", "decoder-only", "valid_file = \"v.txt\"\n", "", loss),
                       {"data.train_file", "required key is missing", "\"lm\""});
  }
  SECTION("lm given train_src names the keys it reads") {
    require_task_error(task_config("lm", "decoder-only", kTextFiles + "train_src = \"a.de\"\n", "", loss),
                       {"data.train_src", "reads train_file", "not train_src"});
  }
  SECTION("translation given train_file") {
    require_task_error(task_config("translation", "encoder-decoder", kPairFiles + "train_file = \"t.txt\"\n"),
                       {"data.train_file", "reads train_src", "not train_file"});
  }
  SECTION("classify without labels, with one, with a duplicate or an empty one") {
    require_task_error(task_config("classify", "encoder-only", kTextFiles, "", accuracy), {"data.labels", "at least two"});
    require_task_error(task_config("classify", "encoder-only", kTextFiles + "labels = \"only\"\n", "", accuracy),
                       {"data.labels", "at least two", "\"only\""});
    require_task_error(task_config("classify", "encoder-only", kTextFiles + "labels = \"a, b,a\"\n", "", accuracy),
                       {"data.labels", "different", "\"a, b,a\""});
    require_task_error(task_config("classify", "encoder-only", kTextFiles + "labels = \"a,,b\"\n", "", accuracy),
                       {"data.labels", "non-empty"});
  }
  SECTION("labels for another task") {
    require_task_error(task_config("mlm", "encoder-only", kTextFiles + "labels = \"a,b\"\n", "", accuracy),
                       {"data.labels", "only data.task = \"classify\""});
  }
  SECTION("best_metric the task does not measure") {
    require_task_error(task_config("lm", "decoder-only", kTextFiles, "", "best_metric = \"bleu\""),
                       {"train.best_metric", "\"bleu\" is not measured by data.task = \"lm\"", "\"loss\""});
    require_task_error(task_config("lm", "decoder-only", kTextFiles, "", accuracy), {"train.best_metric", "\"accuracy\""});
    require_task_error(task_config("translation", "encoder-decoder", kPairFiles, "", accuracy),
                       {"train.best_metric", "\"translation\""});
    require_task_error(task_config("mlm", "encoder-only", kTextFiles, "", "best_metric = \"bleu\""),
                       {"train.best_metric", "\"mlm\"", "\"accuracy\" or \"loss\""});
  }
  SECTION("a decoder-only translation with two tokenizers") {
    // share_embeddings = false, or its own check (one vocabulary to share) would speak first
    require_task_error(task_config("translation", "decoder-only", kPairFiles + "joint_tokenizer = false\n",
                                   "share_embeddings = false\n"),
                       {"data.joint_tokenizer", "one vocabulary", "set data.joint_tokenizer = true"});
  }
}

TEST_CASE("to_toml round trips the task, labels and pooling", "[config][tasks]") {
  TempDir dir;
  const train::Config original = train::load_config(
      dir.write("a/cfg.toml", task_config("classify", "encoder-only", kTextFiles + "labels = \"neg, pos ,mixed\"\n",
                                          "pooling = \"cls\"\n", "best_metric = \"accuracy\"")));
  CHECK(original.data.task == "classify");
  CHECK(train::class_labels(original.data) == std::vector<std::string>{"neg", "pos", "mixed"});  // trimmed
  const std::string written = train::to_toml(original);
  const train::Config reloaded = train::load_config(dir.write("b/elsewhere.toml", written));
  CHECK(reloaded == original);
  CHECK(reloaded.data.task == "classify");
  CHECK(reloaded.data.labels == original.data.labels);
  CHECK(reloaded.model.pooling == "cls");
  CHECK(reloaded.model.arch == "encoder-only");
  CHECK(reloaded.data.train_file == original.data.train_file);
  CHECK(fs::path(reloaded.data.train_file).is_absolute());
  CHECK(train::to_toml(reloaded) == written);
}

// ---- 2. tokenizer symbols ----------------------------------------------------------------------

namespace {

// A tokenizer trained on 200 cyclic lines (plus lines that spell out the symbols' letters) in
// `dir`, with `symbols` after the four fixed ids.
data::Tokenizer tiny_tokenizer(const TempDir& dir, const std::vector<std::string>& symbols, const std::string& name = "spm") {
  const std::string text = dir.write(name + ".txt", cyclic_text(200, 7) + "a sep b\nmask cls\n");
  return data::Tokenizer::train({text}, dir / (name + ".model"), kVocabSize, "unigram", 1, symbols);
}

bool contains_id(const Ids& ids, std::int64_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

TEST_CASE("task symbols take ids 4 and 5 and are never produced from text", "[data][tokenizer][tasks]") {
  TempDir dir;
  const data::Tokenizer tok = tiny_tokenizer(dir, {"<sep>", "<mask>"});
  CHECK(tok.symbol_id("<sep>") == 4);
  CHECK(tok.symbol_id("<mask>") == 5);
  CHECK(tok.first_ordinary_id() == 6);
  CHECK(tok.vocab_size() == kVocabSize);  // the symbols count within the vocabulary
  for (const char* text : {"a <sep> b", "<sep>", "lo<sep>be", "<mask>", "lo <mask> be <sep>"}) {
    INFO(text);
    const Ids ids = tok.encode(text);
    CHECK_FALSE(ids.empty());
    CHECK_FALSE(contains_id(ids, 4));
    CHECK_FALSE(contains_id(ids, 5));
  }
  // decode drops them: lo <sep> be reads as lo be
  Ids with_sep = tok.encode("lo be");
  with_sep.insert(with_sep.begin() + 1, 4);
  CHECK(tok.decode(with_sep) == "lo be");
  REQUIRE_THROWS_AS(tok.symbol_id("<cls>"), std::runtime_error);
  REQUIRE_THROWS_WITH(tok.symbol_id("<cls>"), Contains("<cls>") && Contains(dir / "spm.model"));
  REQUIRE_THROWS_WITH(tok.symbol_id("lo"), Contains("no lo symbol"));  // an ordinary piece is no symbol

  const data::Tokenizer plain = tiny_tokenizer(dir, {}, "plain");
  CHECK(plain.first_ordinary_id() == 4);
  REQUIRE_THROWS_WITH(plain.symbol_id("<sep>"), Contains("<sep>"));
  const data::Tokenizer classify = tiny_tokenizer(dir, {"<cls>", "<sep>"}, "classify");
  CHECK(classify.symbol_id("<cls>") == 4);
  CHECK(classify.symbol_id("<sep>") == 5);
}

// ---- 3. batcher: joined rows -------------------------------------------------------------------

TEST_CASE("Rows Joined counts rows times S plus T plus 2 within the budget", "[data][batcher][tasks]") {
  constexpr std::int64_t kBudget = 120;
  Generator gen(9);
  std::vector<Ids> src, tgt;
  for (int i = 0; i < 300; ++i) {
    src.emplace_back(draw(gen, 1, 20), 7);
    tgt.emplace_back(draw(gen, 1, 20), 8);
  }
  std::map<data::Batcher::Rows, std::int64_t> batches;
  for (const auto rows : {data::Batcher::Rows::Joined, data::Batcher::Rows::Pair}) {
    data::Batcher batcher(src, tgt, kBudget, 3, /*shuffle=*/true, rows);
    std::vector<int> seen(src.size(), 0);
    Ids indices;
    while (batcher.next_indices(indices)) {
      std::int64_t longest = 0;
      for (const std::int64_t i : indices) {
        ++seen[i];
        const auto s = static_cast<std::int64_t>(src[i].size()), t = static_cast<std::int64_t>(tgt[i].size());
        longest = std::max(longest, rows == data::Batcher::Rows::Joined ? s + t + 2 : std::max(s, t + 1));
      }
      INFO("rows " << indices.size() << " x longest " << longest);
      if (indices.size() > 1) CHECK(static_cast<std::int64_t>(indices.size()) * longest <= kBudget);
      ++batches[rows];
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));  // every pair once
  }
  CHECK(batches[data::Batcher::Rows::Joined] > batches[data::Batcher::Rows::Pair]);  // joined rows are longer

  // two pairs of 3 + 3 tokens: max(3, 4) = 4 each (8 of 10) as pairs, 3 + 3 + 2 = 8 each (16) joined
  const std::vector<Ids> s2 = {{5, 6, 7}, {5, 6, 8}}, t2 = {{9, 10, 11}, {9, 10, 12}};
  CHECK(data::Batcher(s2, t2, 10, 0, false, data::Batcher::Rows::Pair).batches_per_epoch() == 1);
  CHECK(data::Batcher(s2, t2, 10, 0, false, data::Batcher::Rows::Joined).batches_per_epoch() == 2);
  CHECK(data::Batcher(s2, t2, 16, 0, false, data::Batcher::Rows::Joined).batches_per_epoch() == 1);
}

// ---- 4. the batches of each task ---------------------------------------------------------------

namespace {

// A split of `n` hand-made rows with ordinary ids in [first, vocab): row i has 30 + i tokens
// (src and tgt the same, as load_text_split makes them).
train::EncodedSplit hand_split(std::int64_t first, std::int64_t vocab, int n) {
  train::EncodedSplit s;
  for (int i = 0; i < n; ++i) {
    Ids ids;
    for (int k = 0; k < 30 + i; ++k) ids.push_back(first + (7 * k + 3 * i) % (vocab - first));
    s.src.push_back(ids), s.tgt.push_back(ids);
    s.src_text.emplace_back(), s.tgt_text.emplace_back();
  }
  return s;
}

// The first `len` entries of row b of a (B,S) int64 tensor.
Ids row_of(const Tensor& t, std::int64_t b, std::size_t len) {
  const auto all = t.contiguous().to_vector<std::int64_t>();
  const auto start = all.begin() + b * t.size(1);
  return {start, start + static_cast<std::ptrdiff_t>(len)};
}

train::Config task_cfg(const std::string& task, const std::string& arch, std::int64_t seed = 5) {
  train::Config cfg;
  cfg.data.task = task;
  cfg.model.arch = arch;
  cfg.train.seed = seed;
  return cfg;
}

}  // namespace

TEST_CASE("masked-LM masks are a function of seed, epoch and row only", "[tasks][training]") {
  TempDir dir;
  const data::Tokenizer tok = tiny_tokenizer(dir, {"<mask>"});
  const data::Tokenizers toks{tok, tok};
  const std::int64_t mask_id = tok.symbol_id("<mask>");
  const train::TaskBatches task(task_cfg("mlm", "encoder-only"), toks);
  CHECK(task.ignore_index() == data::kPadId);
  CHECK(task.counts_accuracy());
  CHECK(task.rows() == data::Batcher::Rows::Pair);
  const train::EncodedSplit split = hand_split(tok.first_ordinary_id(), tok.vocab_size(), 4);
  const std::size_t len = split.src[2].size();  // row 2: 32 tokens

  const data::Batch a = task.make(split, {0, 1, 2, 3}, 0);  // row 2 at position 2
  const data::Batch b = task.make(split, {3, 2}, 0);        // at position 1, in another batch
  const data::Batch c = task.make(split, {2}, 1);           // another epoch
  const data::Batch d = train::TaskBatches(task_cfg("mlm", "encoder-only", 6), toks).make(split, {2}, 0);  // another seed
  CHECK(a.indices == Ids{0, 1, 2, 3});
  const Ids input = row_of(a.src, 2, len), target = row_of(a.tgt_out, 2, len);
  CHECK(row_of(b.src, 1, len) == input);
  CHECK(row_of(b.tgt_out, 1, len) == target);
  // it is masked at all: some positions are chosen (the target holds the original id there)
  std::int64_t chosen = 0;
  for (std::size_t i = 0; i < len; ++i)
    if (target[i] != data::kPadId) {
      ++chosen;
      CHECK(target[i] == split.src[2][i]);
    }
  CHECK(chosen > 0);
  CHECK(std::count(input.begin(), input.end(), mask_id) > 0);
  CHECK((row_of(c.src, 0, len) != input || row_of(c.tgt_out, 0, len) != target));
  CHECK((row_of(d.src, 0, len) != input || row_of(d.tgt_out, 0, len) != target));
  // tgt_tokens counts the chosen positions of every row
  const auto all = a.tgt_out.to_vector<std::int64_t>();
  CHECK(a.tgt_tokens == std::count_if(all.begin(), all.end(), [](std::int64_t v) { return v != data::kPadId; }));
}

TEST_CASE("classify batches hold the labels with ignore index -100, other tasks their own", "[tasks][training]") {
  TempDir dir;
  const data::Tokenizer tok = tiny_tokenizer(dir, {"<cls>", "<sep>"});
  const data::Tokenizers toks{tok, tok};
  train::Config cfg = task_cfg("classify", "encoder-only");
  cfg.data.labels = "no,yes,maybe";
  const train::TaskBatches task(cfg, toks);
  CHECK(task.ignore_index() == -100);  // label 0 ("no") is a class, not padding
  CHECK(task.counts_accuracy());
  train::EncodedSplit split;
  split.src = {train::classify_input(tok, "lo be", ""), train::classify_input(tok, "co", "da fi"),
               train::classify_input(tok, "ki", ""), train::classify_input(tok, "mo nu pe", "")};
  split.tgt = {{0}, {2}, {1}, {0}};
  split.src_text.resize(4), split.tgt_text.resize(4);
  CHECK(split.src[1].front() == tok.symbol_id("<cls>"));
  CHECK(contains_id(split.src[1], tok.symbol_id("<sep>")));
  CHECK_FALSE(contains_id(split.src[0], tok.symbol_id("<sep>")));
  const data::Batch batch = task.make(split, {0, 1, 2, 3}, 0);
  REQUIRE(batch.tgt_out.shape() == Shape{4});
  CHECK(batch.tgt_out.to_vector<std::int64_t>() == Ids{0, 2, 1, 0});
  CHECK(batch.tgt_tokens == 4);
  CHECK(batch.src.size(0) == 4);
  CHECK(row_of(batch.src, 1, split.src[1].size()) == split.src[1]);

  const train::TaskBatches lm(task_cfg("lm", "decoder-only"), toks);
  CHECK(lm.ignore_index() == data::kPadId);
  CHECK_FALSE(lm.counts_accuracy());
  const train::TaskBatches translation(task_cfg("translation", "decoder-only"), toks);
  CHECK(translation.rows() == data::Batcher::Rows::Joined);
  CHECK_FALSE(translation.counts_accuracy());
  const data::Batch prompted = translation.make(split, {2}, 0);  // <s> src <sep> tgt: the sep id 5
  CHECK(contains_id(row_of(prompted.tgt_in, 0, static_cast<std::size_t>(prompted.tgt_in.size(1))), tok.symbol_id("<sep>")));
  CHECK(train::TaskBatches(task_cfg("translation", "encoder-decoder"), toks).rows() == data::Batcher::Rows::Pair);
}

TEST_CASE("count_correct counts argmax hits among the rows not ignored", "[tasks][training]") {
  // rows' argmax: 2, 0, 0 (a tie between 0 and 1: the first wins), 1, 0 (all equal)
  const Tensor logits = from_vector<float>({0.1f, 0.2f, 0.9f,  //
                                            1.0f, 0.5f, 0.5f,  //
                                            0.3f, 0.3f, 0.2f,  //
                                            0.0f, 2.0f, 1.0f,  //
                                            5.0f, 5.0f, 5.0f},
                                           {5, 3});
  const Tensor targets = from_vector<std::int64_t>({2, 1, 0, 1, -100}, {5});
  std::int64_t total = 10;  // it adds to what is there
  CHECK(train::count_correct(logits, targets, -100, total) == 3);  // rows 0, 2, 3; row 1 wrong
  CHECK(total == 14);
  total = 0;
  CHECK(train::count_correct(logits, targets, data::kPadId, total) == 2);  // row 2 ignored; row 4 counted, wrong
  CHECK(total == 4);
}

// ---- 5. data errors ----------------------------------------------------------------------------

TEST_CASE("load_classify_split names the file and the line of a bad label or a malformed line", "[tasks][corpus][errors]") {
  TempDir dir;
  const data::Tokenizer tok = tiny_tokenizer(dir, {"<cls>", "<sep>"});
  const std::vector<std::string> labels = {"no", "yes"};
  train::Progress progress;
  struct Case {
    const char* what;
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"unknown label", "yes\tlo be\nmaybe\tco da\n", {" line 2: ", "unknown label \"maybe\"", "no, yes"}},
      {"no tab", "yes\tlo\nno lo be\n", {" line 2: ", "found no tab"}},
      {"four fields", "yes\tlo\tbe\tco\n", {" line 1: ", "at most 3", "found 4"}},
      {"empty text", "yes\tlo\nno\t \n", {" line 2: ", "field 2", "is empty"}},
      {"empty label", "yes\tlo\n\tlo be\n", {" line 2: ", "field 1 (the label) is empty"}},
      {"empty second text", "yes\tlo\tbe\nno\tlo\t\n", {" line 2: ", "field 3"}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string path = dir.write("bad.tsv", c.text);
    REQUIRE_THROWS_AS(train::load_classify_split(path, tok, labels, 30, "train", progress), data::CorpusError);
    try {
      train::load_classify_split(path, tok, labels, 30, "train", progress);
    } catch (const data::CorpusError& e) {
      const std::string what = e.what();
      CHECK(what.find('\n') == std::string::npos);
      CHECK_THAT(what, Contains(path + " line "));
      for (const auto& part : c.expected) CHECK_THAT(what, Contains(part));
    }
  }
  // a good file: <cls> a [<sep> b] -> the label's index, the text and the label's name kept
  const std::string good = dir.write("good.tsv", "yes\tlo be\tco\nno\tki\n");
  const train::EncodedSplit s = train::load_classify_split(good, tok, labels, 30, "train", progress);
  REQUIRE(s.src.size() == 2);
  CHECK(s.tgt == std::vector<Ids>{{1}, {0}});
  CHECK(s.src[0] == train::classify_input(tok, "lo be", "co"));
  CHECK(s.src_text == std::vector<std::string>{"lo be\tco", "ki"});
  CHECK(s.tgt_text == std::vector<std::string>{"yes", "no"});
}

TEST_CASE("load_text_split keeps the non-blank lines and names a file with none", "[tasks][corpus][errors]") {
  TempDir dir;
  const data::Tokenizer tok = tiny_tokenizer(dir, {"<mask>"});
  train::Progress progress;
  const train::EncodedSplit s =
      train::load_text_split(dir.write("t.txt", "lo be\n\n   \nco da fi\n"), tok, 30, "valid", progress);
  CHECK(s.src_text == std::vector<std::string>{"lo be", "co da fi"});
  CHECK(s.src == s.tgt);
  CHECK(s.src[1] == tok.encode("co da fi"));
  const std::string blank = dir.write("blank.txt", "\n  \n");
  REQUIRE_THROWS_AS(train::load_text_split(blank, tok, 30, "valid", progress), data::CorpusError);
  REQUIRE_THROWS_WITH(train::load_text_split(blank, tok, 30, "valid", progress),
                      Contains(blank) && Contains("no example is left"));
}

// ---- 6 and 7. a tiny run of each task, and the commands on its checkpoint -----------------------

TEST_CASE("an lm run trains, generates and evaluates, and the commands of other tasks refuse it", "[tasks][training][cli]") {
  const TaskRun& run = task_run("lm");
  const std::string ck = quoted(run.checkpoint);
  SECTION("training") { check_training(run, /*accuracy=*/false, /*bleu=*/false, /*test=*/true); }
  SECTION("generate greedy: the continuation on stdout, the phases and the KV cache on stderr") {
    const CliResult r = run_cli("generate --checkpoint " + ck + " --prompt 'lo be' --temperature 0 --max-new 6", runs_folder());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(count_lines(r.out) == 1);
    CHECK(r.out.rfind("lo be co", 0) == 0);  // the prompt, then what follows "be" in every line
    CHECK(count_lines(r.err) == 1);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex(R"(prefill: (\d+) tokens in .* \| decode: (\d+) tokens, .* \| )"
                                                   R"(KV cache at (\d+) positions: (\d+) bytes by 2\*L\*Hkv\*T\*Dh\*4 )"
                                                   R"(\(L 2, Hkv 2, Dh 8\), (\d+) allocated)")));
    const std::int64_t prompt = std::stoll(m[1]), steps = std::stoll(m[2]), positions = std::stoll(m[3]);
    CHECK(prompt >= 3);                           // <s> lo be
    CHECK(positions == prompt + steps);           // the prompt, and one more per decode step
    CHECK(std::stoll(m[4]) == 2 * 2 * 2 * positions * 8 * 4);  // 2 L Hkv T Dh 4 bytes
    CHECK(std::stoll(m[5]) == std::stoll(m[4]));  // allocated = the formula
  }
  SECTION("generate from a file of prompts, sampled with a seed: the same output twice") {
    const std::string input = runs_folder().write("prompts.txt", "lo\n\nki mo\n");
    const std::string args = "generate --checkpoint " + ck + " --input " + quoted(input) + " --temperature 1 --top-p 0.9 --seed 3";
    const CliResult r = run_cli(args, runs_folder()), again = run_cli(args, runs_folder());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(count_lines(r.out) == 3);
    CHECK(count_lines(r.err) == 3);
    CHECK(lines_of(r.out)[0].rfind("lo", 0) == 0);
    CHECK(lines_of(r.out)[2].rfind("ki mo", 0) == 0);
    CHECK(again.out == r.out);
  }
  SECTION("eval --input: loss, nll and perplexity, no accuracy") {
    check_eval(run, runs_folder() / "lm/valid.txt", /*accuracy=*/false);
  }
  SECTION("fill-mask, translate and classify refuse an lm checkpoint") {
    const std::string holds = "holds a decoder-only model trained with data.task = \"lm\"";
    check_one_line_error(run_cli("fill-mask --checkpoint " + ck + " --text 'lo <mask>'", runs_folder()),
                         {"fill-mask needs an encoder-only model trained with data.task = \"mlm\"", run.checkpoint, holds});
    check_one_line_error(run_cli("translate --checkpoint " + ck + " --input /dev/null", runs_folder()),
                         {"translate needs an encoder-decoder, rnn or decoder-only model trained with data.task = \"translation\"",
                          run.checkpoint, holds});
    check_one_line_error(run_cli("classify --checkpoint " + ck + " --input /dev/null", runs_folder()),
                         {"classify needs", "\"classify\"", holds});
  }
  SECTION("bad generate options") {
    const std::string gen = "generate --checkpoint " + ck + " --prompt lo ";
    check_one_line_error(run_cli(gen + "--temperature -1", runs_folder()), {"--temperature", "-1"});
    check_one_line_error(run_cli(gen + "--top-p 0", runs_folder()), {"--top-p", "(0, 1]"});
    check_one_line_error(run_cli(gen + "--top-p 1.5", runs_folder()), {"--top-p", "1.5"});
    check_one_line_error(run_cli(gen + "--top-k 0", runs_folder()), {"--top-k", "at least 1"});
    check_one_line_error(run_cli("generate --checkpoint " + ck + " --prompt " + quoted(cyclic_words(0, 40)), runs_folder()),
                         {"generate: the prompt is", "the model has 32 positions (model.max_len)"});
    check_one_line_error(run_cli("generate --checkpoint " + ck, runs_folder()), {"--prompt", "--input"});
  }
}

TEST_CASE("an mlm run trains and fills masks, and generate and classify refuse it", "[tasks][training][cli]") {
  const TaskRun& run = task_run("mlm");
  const std::string ck = quoted(run.checkpoint);
  SECTION("training") { check_training(run, /*accuracy=*/true, /*bleu=*/false, /*test=*/false); }
  SECTION("fill-mask: one line per mask, then the filled sentence") {
    const CliResult r = run_cli("fill-mask --checkpoint " + ck + " --text 'lo be <mask> da fi'", runs_folder());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].rfind("mask 1 (token ", 0) == 0);
    CHECK(count_of(lines[0], ",") == 4);  // the top 5
    CHECK(lines[1].rfind("filled: lo be", 0) == 0);
    CHECK(lines[1].find("<mask>") == std::string::npos);
    CHECK(lines[1].substr(lines[1].size() - 6) == " da fi");
    CHECK(r.err.empty());
    const CliResult two = run_cli("fill-mask --checkpoint " + ck + " --text '<mask> be co <mask>' --top-k 2", runs_folder());
    REQUIRE(two.status == 0);
    CHECK(count_of(two.out, "mask 1 ") == 1);
    CHECK(count_of(two.out, "mask 2 ") == 1);
    CHECK(count_of(two.out, ",") == 2);  // two per mask
    check_one_line_error(run_cli("fill-mask --checkpoint " + ck + " --text 'lo be'", runs_folder()), {"has no <mask>"});
  }
  SECTION("eval --input: the masked-token accuracy") {
    check_eval(run, runs_folder() / "mlm/valid.txt", /*accuracy=*/true);
  }
  SECTION("generate and classify refuse an mlm checkpoint") {
    const std::string holds = "holds an encoder-only model trained with data.task = \"mlm\"";
    check_one_line_error(run_cli("generate --checkpoint " + ck + " --prompt lo", runs_folder()),
                         {"generate needs a decoder-only model", run.checkpoint, holds});
    check_one_line_error(run_cli("classify --checkpoint " + ck + " --input /dev/null", runs_folder()),
                         {"classify needs an encoder-only model trained with data.task = \"classify\"", run.checkpoint, holds});
  }
}

TEST_CASE("a classify run trains and labels lines, and fill-mask refuses it", "[tasks][training][cli]") {
  const TaskRun& run = task_run("classify");
  const std::string ck = quoted(run.checkpoint);
  SECTION("training") { check_training(run, /*accuracy=*/true, /*bleu=*/false, /*test=*/true); }
  SECTION("classify: label and probability per line, a blank line for a blank one") {
    const std::string input = runs_folder().write("classify-in.txt", "lo ki be\n\nco da fi\n   \nlo\tki mo\n");
    for (const bool from_stdin : {false, true}) {
      INFO((from_stdin ? "stdin" : "--input"));
      const CliResult r = from_stdin ? run_cli("classify --checkpoint " + ck, runs_folder(), input)
                                     : run_cli("classify --checkpoint " + ck + " --input " + quoted(input), runs_folder());
      INFO("stdout: " << r.out << "\nstderr: " << r.err);
      REQUIRE(r.status == 0);
      const auto lines = lines_of(r.out);
      REQUIRE(lines.size() == 5);
      for (const std::size_t i : {0, 2, 4}) {
        std::smatch m;
        REQUIRE(std::regex_match(lines[i], m, std::regex(R"((no|yes)\t([01]\.\d{3}))")));
        CHECK(std::stod(m[2]) >= 0.5);  // the most likely of two classes
      }
      CHECK(lines[1].empty());
      CHECK(lines[3].empty());
      CHECK(r.err.empty());
    }
  }
  SECTION("eval --input: the accuracy of the labels") {
    check_eval(run, runs_folder() / "classify/valid.txt", /*accuracy=*/true);
  }
  SECTION("fill-mask refuses a classify checkpoint") {
    check_one_line_error(run_cli("fill-mask --checkpoint " + ck + " --text '<mask>'", runs_folder()),
                         {"fill-mask needs", "holds an encoder-only model trained with data.task = \"classify\""});
  }
}

TEST_CASE("a decoder-only translation run trains and translates", "[tasks][training][translate][cli]") {
  const TaskRun& run = task_run("translation");
  const std::string ck = quoted(run.checkpoint);
  SECTION("training") { check_training(run, /*accuracy=*/false, /*bleu=*/true, /*test=*/false); }
  SECTION("translate: one line out per line in") {
    const std::string input = runs_folder().write("translate-in.txt", "lo be co\n\nki\n");
    const CliResult r = run_cli("translate --checkpoint " + ck + " --input " + quoted(input), runs_folder());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 3);
    CHECK(lines[1].empty());
    CHECK(r.err.empty());
  }
  SECTION("eval --src --ref: BLEU and the loss of the pairs") {
    const std::string dir = runs_folder() / "translation/";
    const CliResult r = run_cli("eval --checkpoint " + ck + " --src " + quoted(dir + "valid.src") + " --ref " +
                                    quoted(dir + "valid.tgt"), runs_folder());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("BLEU"));
    CHECK(line_starting(r.out, "loss ").find("(") != std::string::npos);
  }
}
