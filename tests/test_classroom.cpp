// The classroom commands (train/classroom/gradcheck_suite.h, train/classroom/attention_figures.h and explain_batch.h, `scratchformer gradcheck |
// attention | plot | explain-batch | summary`), run as the real binary:
//   gradcheck for one module and a topic, --list (the suite's own entries and its table are
//     tests/test_gradcheck_suite.cpp); plot of a hand-written metrics.tsv and
//     of a config's positions and schedule; explain-batch of configs/reverse.toml (teacher forcing
//     checked on the printed columns); attention heatmaps from a checkpoint trained for two steps;
//     bad input for every command is exit status 2 with one line on stderr;
//   the same commands in Chinese (--lang zh, or LANG=zh_CN.UTF-8 and no --lang; train/classroom/lang.h):
//     their headings and captions, the same numbers, and Chinese tokens aligned by display width.
#include "run_util.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/attention_figures.h"
#include "train/classroom/explain_batch.h"
#include "train/classroom/gradcheck_suite.h"
#include "train/classroom/lang.h"
#include "train/classroom/summary.h"
#include "train/setup.h"

namespace fs = std::filesystem;
using Catch::Contains;
using namespace sf;
using namespace sf::train;

namespace {

// tests/test_util.h and tests/run_util.h
using sf::test::CliResult;
using sf::test::count_lines;
using sf::test::count_of;
using sf::test::kReverseConfig;
using sf::test::read_file;
using sf::test::run_cli;
using sf::test::TempDir;
using sf::test::write_file;

// Without --lang the classroom commands follow LANG (--lang auto): the tests of their English output
// must not depend on the locale of the shell that runs them, so LANG is unset when this test
// program starts; a test that wants the Chinese locale sets it with LangEnv.
[[maybe_unused]] const bool kLangUnset = [] { return ::unsetenv("LANG") == 0; }();

// LANG set to `value` while it lives (the scratchformer runs started by run_cli inherit it), then
// unset again.
struct LangEnv {
  explicit LangEnv(const char* value) { ::setenv("LANG", value, 1); }
  ~LangEnv() { ::unsetenv("LANG"); }
  LangEnv(const LangEnv&) = delete;
  LangEnv& operator=(const LangEnv&) = delete;
};

// XDG_CACHE_HOME pointed at a temporary directory while it lives (the scratchformer runs started
// by run_cli inherit it), so the tokenizer cache of explain-batch stays out of the user's home.
struct CacheHome {
  TempDir dir;
  fs::path path = dir.path / "cache";
  std::string saved;
  bool had = false;
  CacheHome() {
    if (const char* old = std::getenv("XDG_CACHE_HOME")) had = true, saved = old;
    ::setenv("XDG_CACHE_HOME", path.c_str(), 1);
  }
  ~CacheHome() { had ? ::setenv("XDG_CACHE_HOME", saved.c_str(), 1) : ::unsetenv("XDG_CACHE_HOME"); }
  CacheHome(const CacheHome&) = delete;
  CacheHome& operator=(const CacheHome&) = delete;
};

// Bad input: status 2 and exactly one line on stderr that mentions `what`.
void require_one_line_error(const std::vector<std::string>& args, const std::string& what) {
  const CliResult r = run_cli(args);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.status == 2);
  REQUIRE(count_lines(r.err) == 1);
  REQUIRE_THAT(r.err, Contains("error") && Contains(what));
}

// An SVG document as SvgWriter writes it: an optional XML declaration, then one <svg> root that
// closes at the very end, with as many <g ...> as </g>.
void require_svg_document(const std::string& doc) {
  std::size_t start = 0;
  if (doc.rfind("<?xml", 0) == 0) start = doc.find("?>") + 2;
  while (start < doc.size() && std::isspace(static_cast<unsigned char>(doc[start]))) ++start;
  REQUIRE(doc.compare(start, 4, "<svg") == 0);
  std::string tail = doc;
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.pop_back();
  REQUIRE(tail.size() >= 6);
  REQUIRE(tail.substr(tail.size() - 6) == "</svg>");
  REQUIRE(count_of(doc, "<svg") == 1);
  REQUIRE(count_of(doc, "<g ") + count_of(doc, "<g>") == count_of(doc, "</g>"));
}

}  // namespace

// =================================================================================== gradcheck

TEST_CASE("gradcheck command runs one module or a topic and lists every check", "[classroom][cli][grad]") {
  const CliResult one = run_cli({"gradcheck", "--module", "layer_norm"});
  INFO(one.out << one.err);
  REQUIRE(one.status == 0);
  REQUIRE_THAT(one.out, Contains("module") && Contains("max abs error") && Contains("layer_norm") && Contains("all passed"));
  const GradcheckEntry& ln = *find_gradcheck("layer_norm");
  REQUIRE(count_of(one.out, "pass\n") == gradcheck_rows(ln, ln.run(GradcheckOptions{})).size());  // every row passes
  REQUIRE(one.out.find("rms_norm ") == std::string::npos);

  const CliResult topic = run_cli({"gradcheck", "--module", "norms"});
  REQUIRE(topic.status == 0);
  REQUIRE_THAT(topic.out, Contains("layer_norm") && Contains("rms_norm"));

  const CliResult list = run_cli({"gradcheck", "--list"});
  REQUIRE(list.status == 0);
  REQUIRE(count_lines(list.out) == gradcheck_suite().size());
  for (const GradcheckEntry& e : gradcheck_suite()) REQUIRE_THAT(list.out, Contains(e.name));

  require_one_line_error({"gradcheck", "--module", "no_such_module"}, "no_such_module");
  const CliResult bad = run_cli({"gradcheck", "--module", "no_such_module"});
  REQUIRE_THAT(bad.err, Contains("embedding") && Contains("decoder_layer") && Contains("all"));  // the valid names
}

// ========================================================================================= plot

TEST_CASE("plot draws the training curves of a hand-written metrics file", "[classroom][cli][plots]") {
  TempDir run;
  write_file(run.path / "metrics.tsv",
             "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\n"
             "10\t1\ttrain\t4.5\t4.2\t66.7\t0.001\t900\t1.5\t\t3\n"
             "20\t1\ttrain\t3.1\t2.9\t18.2\t0.002\t950\t1.1\t\t6\n"
             "20\t1\tvalid\t3.3\t3.0\t20.1\t\t\t\t12.5\t7\n");
  const CliResult r = run_cli({"plot", run.path.string()});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const fs::path svg = run.path / "curves.svg";
  REQUIRE_THAT(r.out, Contains(svg.string()));
  const std::string doc = read_file(svg);
  require_svg_document(doc);
  REQUIRE_THAT(doc, Contains("Training curves") && Contains("valid BLEU"));

  const fs::path other = run.path / "sub" / "mine.svg";
  REQUIRE(run_cli({"plot", run.path.string(), "--out", other.string()}).status == 0);
  require_svg_document(read_file(other));
}

TEST_CASE("plot draws the positional encodings and the schedule of a config", "[classroom][cli][plots]") {
  TempDir dir;
  const fs::path positions = dir.path / "positions.svg", schedule = dir.path / "schedule.svg";
  const CliResult p = run_cli({"plot", "--config", kReverseConfig, "--what", "positions", "--out", positions.string()});
  INFO(p.out << p.err);
  REQUIRE(p.status == 0);
  const std::string pos_doc = read_file(positions);
  require_svg_document(pos_doc);
  REQUIRE_THAT(pos_doc, Contains("max_len 64") && Contains("d_model 64"));  // configs/reverse.toml's model
  REQUIRE(count_of(pos_doc, "<rect") >= 64 * 64);                          // one cell per table entry

  const CliResult s = run_cli({"plot", "--config", kReverseConfig, "--what", "schedule", "--out", schedule.string()});
  REQUIRE(s.status == 0);
  const std::string sched_doc = read_file(schedule);
  require_svg_document(sched_doc);
  REQUIRE_THAT(sched_doc, Contains("cosine") && Contains("warmup 50") && Contains("<polyline"));

  // without --out: the run directory of the config (here overridden)
  const fs::path run_dir = dir.path / "run";
  REQUIRE(run_cli({"plot", "--config", kReverseConfig, "--what", "schedule", "--set", "run.dir=" + run_dir.string()}).status == 0);
  require_svg_document(read_file(run_dir / "schedule.svg"));
}

TEST_CASE("plot bad input is one line and exit status 2", "[classroom][cli][plots][errors]") {
  TempDir dir;
  require_one_line_error({"plot"}, "run directory");
  require_one_line_error({"plot", dir.path.string(), "--config", kReverseConfig}, "not both");
  require_one_line_error({"plot", "--config", kReverseConfig}, "--what");
  require_one_line_error({"plot", "--config", kReverseConfig, "--what", "colours"}, "colours");
  require_one_line_error({"plot", (dir.path / "missing").string()}, "missing");
  require_one_line_error({"plot", dir.path.string()}, "metrics.tsv");  // no metrics file in it
  write_file(dir.path / "metrics.tsv", "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\n"
                                       "10\t1\ttrain\tlots\t4.2\t66.7\t0.001\t900\t1.5\t\t3\n");
  require_one_line_error({"plot", dir.path.string()}, "metrics.tsv:2");
  require_one_line_error({"plot", "--config", kReverseConfig, "--what", "positions", "--set", "model.d_modle=8"}, "d_modle");
  // --out is one file: an existing directory or a name without .svg is refused before any work
  require_one_line_error({"plot", "--config", kReverseConfig, "--what", "schedule", "--out", dir.path.string()}, "is a directory");
  require_one_line_error({"plot", "--config", kReverseConfig, "--what", "schedule", "--out", (dir.path / "a.png").string()}, ".svg");
  CHECK_FALSE(fs::exists(dir.path / "a.png"));
}

// ================================================================================ explain-batch

namespace {

// The whitespace-separated cells of the first line of `text` that starts with "  " + label + " ".
std::vector<std::string> cells_of(const std::string& text, const std::string& label) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("  " + label + " ", 0) == 0) {
      std::istringstream cells(line.substr(label.size() + 2));
      std::vector<std::string> out;
      for (std::string c; cells >> c;) out.push_back(c);
      return out;
    }
  return {};
}

}  // namespace

TEST_CASE("explain-batch shows teacher forcing masks and counts of a real batch", "[classroom][cli][batcher][teacher_forcing]") {
  TempDir run;
  const std::vector<std::string> args = {"explain-batch", "--config", kReverseConfig, "--set", "run.dir=" + run.path.string(),
                                         "--batch", "5"};
  const CacheHome cache;  // the tokenizer is trained there, not into run.dir
  const CliResult r = run_cli(args);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.err, Contains("training one") && Contains(cache.path.string()));  // no tokenizer in run.dir: said where
  REQUIRE(count_lines(r.err) == 1);
  REQUIRE(fs::is_empty(run.path));  // nothing written into run.dir
  REQUIRE_THAT(r.out, Contains("batch 5 of ") && Contains("causal mask") && Contains("padding masks") &&
                          Contains("rows (sentence pairs)"));

  // Row 0: tgt_in = <s> + target, tgt_out = target + </s>: tgt_in[t + 1] == tgt_out[t].
  const std::vector<std::string> src = cells_of(r.out, "src"), in = cells_of(r.out, "tgt_in"), out = cells_of(r.out, "tgt_out");
  REQUIRE_FALSE(src.empty());
  REQUIRE(in.size() == out.size());
  REQUIRE(in.size() >= 2);
  REQUIRE(in[0] == "<s>");
  std::size_t real = 0;
  for (std::size_t t = 0; t + 1 < in.size() && in[t + 1] != "<pad>"; ++t, ++real) REQUIRE(in[t + 1] == out[t]);
  REQUIRE(out[real] == "</s>");
  // The pieces spell the row's sentences (printed above them): "▁" marks a word start.
  const auto spell = [](std::vector<std::string> pieces) {
    std::string text;
    for (const std::string& p : pieces) {
      if (p == "<pad>" || p == "</s>") break;
      text += p;
    }
    for (std::size_t at = text.find("\u2581"); at != std::string::npos; at = text.find("\u2581")) text.replace(at, 3, " ");
    return text.substr(text.find_first_not_of(' '));
  };
  const std::size_t header = r.out.find("\nrow 0 ");
  REQUIRE(header != std::string::npos);
  const std::string row_line = r.out.substr(header + 1, r.out.find('\n', header + 1) - header - 1);
  REQUIRE_THAT(row_line, Contains("\"" + spell(src) + "\" -> \"" + spell(out) + "\""));

  // The causal triangle: row t has t + 1 zeros (itself and the past) then ones.
  std::istringstream lines(r.out.substr(r.out.find("blocked where j > t:")));
  std::string line;
  std::getline(lines, line);
  for (int t = 0; t < 3; ++t) {
    REQUIRE(std::getline(lines, line));
    const std::string bits = line.substr(2);
    REQUIRE(bits.find('1') == static_cast<std::size_t>(t + 1));
    REQUIRE(bits.find_first_not_of('0') == static_cast<std::size_t>(t + 1));
  }

  // budget rows * max(S, T) = X of batch_tokens 2048, with X <= 2048
  const std::size_t at = r.out.find("rows * max(S, T) = ");
  REQUIRE(at != std::string::npos);
  long rows = 0, longest = 0, product = 0;
  REQUIRE(std::sscanf(r.out.c_str() + at, "rows * max(S, T) = %ld * %ld = %ld", &rows, &longest, &product) == 3);
  REQUIRE(rows * longest == product);
  REQUIRE(product <= 2048);

  // The tokenizer is in the cache now: used again (said so), the same batch.
  const CliResult again = run_cli(args);
  REQUIRE(again.status == 0);
  REQUIRE_THAT(again.err, Contains("using the one trained before") && Contains(cache.path.string()));
  REQUIRE(again.out == r.out);
}

TEST_CASE("explain-batch writes nothing into the run directory unless --keep-tokenizer", "[classroom][cli][batcher]") {
  TempDir parent;
  const CacheHome cache;
  const fs::path run = parent.path / "runs" / "reverse";  // as configs/reverse.toml's runs/reverse, not made yet
  const std::vector<std::string> args = {"explain-batch", "--config", kReverseConfig, "--set", "run.dir=" + run.string()};
  const CliResult r = run_cli(args);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK_FALSE(fs::exists(run));                     // the run directory is still absent
  CHECK_FALSE(fs::exists(parent.path / "runs"));
  CHECK_THAT(r.out, Contains(cache.path.string()));  // the header names the tokenizer it used
  std::vector<std::string> keep = args;
  keep.push_back("--keep-tokenizer");
  const CliResult kept = run_cli(keep);
  REQUIRE(kept.status == 0);
  CHECK_THAT(kept.err, Contains("--keep-tokenizer") && Contains(run.string()));
  CHECK(fs::exists(run / "spm.model"));
  // now the run has its own: used as it is, nothing said, nothing new in the cache
  const CliResult own = run_cli(args);
  REQUIRE(own.status == 0);
  CHECK(own.err.empty());
  CHECK_THAT(own.out, Contains((run / "spm.model").string()));
}

TEST_CASE("explain-batch bad input is one line and exit status 2", "[classroom][cli][batcher][errors]") {
  TempDir run;
  const CacheHome cache;
  const std::string dir = "run.dir=" + run.path.string();
  // a first run trains the tokenizer into run.dir (and says so on stderr); errors after it are one line
  REQUIRE(run_cli({"explain-batch", "--config", kReverseConfig, "--set", dir, "--keep-tokenizer"}).status == 0);
  require_one_line_error({"explain-batch"}, "--config");
  require_one_line_error({"explain-batch", "--config", kReverseConfig, "--set", dir, "--batch", "100000"}, "100000");
  require_one_line_error({"explain-batch", "--config", kReverseConfig, "--set", dir, "--batch", "-1"}, "-1");
  require_one_line_error({"explain-batch", "--config", kReverseConfig, "--set", "train.sed=3"}, "train.sed");
  require_one_line_error({"explain-batch", "--config", (run.path / "missing.toml").string()}, "missing.toml");
}

// ==================================================================================== attention

namespace {

// A checkpoint of configs/reverse.toml trained for two steps of a smaller model (D 32, H 2,
// 2 + 2 layers) in a temp run directory: made once, shared by the attention tests.
const fs::path& tiny_checkpoint() {
  static TempDir run;
  static const fs::path checkpoint = [] {
    const CliResult r = run_cli({"train", "--config", kReverseConfig, "--set", "run.dir=" + run.path.string(), "--set",
                                 "train.max_steps=2", "--set", "train.valid_every=2", "--set", "train.log_every=1", "--set",
                                 "data.max_valid_sentences=2", "--set", "data.test_src=\"\"", "--set", "data.test_tgt=\"\"", "--set",
                                 "data.batch_tokens=256", "--set", "model.d_model=32", "--set", "model.n_heads=2", "--set",
                                 "model.d_ff=64"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    return run.path / "checkpoint-last.safetensors";
  }();
  REQUIRE(fs::exists(checkpoint));
  return checkpoint;
}

}  // namespace

TEST_CASE("attention writes encoder, decoder self and cross attention heatmaps of every layer and head", "[classroom][cli][attention]") {
  TempDir out;
  const CliResult r = run_cli({"attention", "--checkpoint", tiny_checkpoint().string(), "--src", "wa mi lo ka", "--out-dir",
                               out.path.string()});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const fs::path cross = out.path / "cross_attention.svg", self = out.path / "self_attention.svg",
                 encoder = out.path / "encoder_self_attention.svg", overview = out.path / "attention_overview.svg";
  REQUIRE_THAT(r.out, Contains("translation (greedy)") && Contains(cross.string()) && Contains(self.string()) &&
                          Contains(encoder.string()) && Contains(overview.string()));
  const std::string cross_doc = read_file(cross), self_doc = read_file(self), enc_doc = read_file(encoder),
                    overview_doc = read_file(overview);
  for (const std::string& doc : {cross_doc, self_doc, enc_doc, overview_doc}) require_svg_document(doc);
  for (const std::string& doc : {cross_doc, self_doc, enc_doc}) {
    // 2 layers x 2 heads
    for (const char* map : {"layer 1, head 1", "layer 1, head 2", "layer 2, head 1", "layer 2, head 2"}) REQUIRE_THAT(doc, Contains(map));
    REQUIRE(doc.find("layer 3,") == std::string::npos);
    REQUIRE(doc.find("head 3") == std::string::npos);
  }
  // the source tokens label the cross-attention columns (each piece starts with U+2581)
  for (const char* piece : {"\u2581wa", "\u2581mi", "\u2581lo", "\u2581ka"}) {
    REQUIRE_THAT(cross_doc, Contains(piece));
    REQUIRE_THAT(enc_doc, Contains(piece));
  }
  REQUIRE_THAT(cross_doc, Contains("Cross-attention"));
  REQUIRE_THAT(self_doc, Contains("Masked self-attention"));
  REQUIRE_THAT(enc_doc, Contains("Encoder self-attention (bidirectional)"));
  // self-attention: the decoder input starts with <s> (escaped), and the future is masked
  REQUIRE_THAT(self_doc, Contains("&lt;s&gt;") && Contains("class=\"masked\""));
  // the encoder is bidirectional: no padding here, so not one cell is masked, 4 x 4 cells per map
  CHECK(count_of(enc_doc, "class=\"masked\"") == 0);
  CHECK(count_of(enc_doc, "class=\"cell\"") == 4 * 4 * 4);
  // the overview: per layer, the encoder's head 1 beside the decoder's head 1
  for (const char* map : {"encoder layer 1, head 1: bidirectional", "decoder layer 1, head 1: causal",
                          "encoder layer 2, head 1: bidirectional", "decoder layer 2, head 1: causal"})
    CHECK_THAT(overview_doc, Contains(map));
  CHECK(overview_doc.find("head 2") == std::string::npos);
  CHECK(count_of(overview_doc, "class=\"masked\"") > 0);  // the decoder's triangle
}

TEST_CASE("attention --pad shows padded source positions masked in the encoder and cross-attention", "[classroom][cli][attention][padding]") {
  TempDir out;
  const std::string ck = tiny_checkpoint().string();
  const CliResult plain = run_cli({"attention", "--checkpoint", ck, "--src", "wa mi lo ka", "--out-dir", out.path.string()});
  const CliResult r = run_cli({"attention", "--checkpoint", ck, "--src", "wa mi lo ka", "--pad", "2", "--out-dir",
                               out.path.string()});
  INFO(r.out << r.err);
  REQUIRE(plain.status == 0);
  REQUIRE(r.status == 0);
  // the same translation: padding is masked, so it changes nothing
  CHECK(r.out.substr(0, r.out.find('\n')) == plain.out.substr(0, plain.out.find('\n')));
  const std::string enc_doc = read_file(out.path / "encoder_self_attention.svg");
  // S = 4 tokens + 2 <pad>: every one of the 6 query rows has the 2 padding keys masked, in 2 x 2 maps
  CHECK(count_of(enc_doc, "class=\"masked\"") == 6 * 2 * 4);
  CHECK(count_of(enc_doc, "class=\"cell\"") == 6 * 4 * 4);
  CHECK_THAT(enc_doc, Contains("&lt;pad&gt;"));
  const std::string cross_doc = read_file(out.path / "cross_attention.svg");
  CHECK(count_of(cross_doc, "class=\"masked\"") > 0);
}

TEST_CASE("attention teacher-forces a given target", "[classroom][cli][attention]") {
  TempDir out;
  const CliResult r = run_cli({"attention", "--checkpoint", tiny_checkpoint().string(), "--src", "wa mi lo ka", "--tgt",
                               "ka lo mi wa", "--out-dir", out.path.string()});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.out, Contains("teacher-forced") && Contains("ka lo mi wa"));
  const std::string self_doc = read_file(out.path / "self_attention.svg");
  // T = 5 decoder positions (<s> ka lo mi wa): the causal mask hides 4+3+2+1 = 10 cells per map
  REQUIRE(count_of(self_doc, "class=\"masked\"") == 10 * 4);
  REQUIRE_THAT(self_doc, Contains("&lt;/s&gt;"));  // the last position produces </s>
}

TEST_CASE("attention bad input is one line and exit status 2", "[classroom][cli][attention][errors]") {
  TempDir dir;
  const std::string ck = tiny_checkpoint().string();
  require_one_line_error({"attention", "--src", "wa"}, "--checkpoint");
  require_one_line_error({"attention", "--checkpoint", ck}, "--src");
  require_one_line_error({"attention", "--checkpoint", (dir.path / "none.safetensors").string(), "--src", "wa"}, "none.safetensors");
  require_one_line_error({"attention", "--checkpoint", ck, "--src", ""}, "--src");
  require_one_line_error({"attention", "--checkpoint", ck, "--src", "wa", "--tgt", "   "}, "--tgt");
  std::string too_long;
  for (int i = 0; i < 80; ++i) too_long += "wa ";
  require_one_line_error({"attention", "--checkpoint", ck, "--src", too_long}, "limit");
  // --out is one file; attention writes several
  require_one_line_error({"attention", "--checkpoint", ck, "--src", "wa", "--out", (dir.path / "a.svg").string()}, "--out-dir");
  CHECK_FALSE(fs::exists(dir.path / "a.svg"));
  write_file(dir.path / "file.txt", "x");
  require_one_line_error({"attention", "--checkpoint", ck, "--src", "wa", "--out-dir", (dir.path / "file.txt").string()}, "is a file");
  require_one_line_error({"attention", "--checkpoint", ck, "--src", "wa", "--pad", "-1"}, "--pad");
}

// summary: for each architecture, the lecture's approximation (computed again here), the exact
// count (the model's own), the difference lines that add up to their gap, and the parts whose
// exact counts sum to the model's (configs of all three, with GQA, learned positions, post-norm,
// RMSNorm, SwiGLU, untied embeddings and a classifier).
namespace {

// "1,234,567" / "+1,024" / "-512" at the start of `text` -> the number.
double count_at(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c == ',') continue;
    if (!(std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+') && digits.empty()))) break;
    digits += c;
  }
  REQUIRE_FALSE(digits.empty());
  return std::stod(digits);
}

// The text after `key` on the line that holds it.
std::string after(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  REQUIRE(at != std::string::npos);
  return text.substr(at + key.size(), text.find('\n', at) - at - key.size());
}

}  // namespace

TEST_CASE("summary parameter formulas equal the model's count for every architecture", "[classroom][params]") {
  const std::string configs = std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"encoder-decoder-de-en.toml", {}},
      {"encoder-decoder-de-en.toml", {"model.share_embeddings=false", "model.tie_output=false", "data.joint_tokenizer=false",
                                      "model.positional=learned", "model.norm_position=post", "model.n_kv_heads=2"}},
      {"decoder-only-de-en.toml", {}},
      {"lm-en.toml", {"model.positional=learned", "model.norm=rmsnorm", "model.activation=swiglu"}},
      {"mlm-de.toml", {"model.norm_position=post"}},
      {"classify-match.toml", {"model.pooling=cls", "data.labels=a,b,c"}}};
  constexpr std::int64_t kVocab = 500;
  for (const auto& [file, overrides] : cases) {
    const Config cfg = load_config(configs + file, overrides);
    const std::string text = model_summary(cfg, kVocab, 16, 1);
    INFO(file << "\n" << text);
    // the approximation, from the lecture's rule: 12D² per encoder layer or decoder-only block,
    // 16D² per decoder layer (self + cross-attention + FFN), one V·D table
    const double D = static_cast<double>(cfg.model.d_model), V = kVocab;
    const double Le = static_cast<double>(cfg.model.encoder_layers), Ld = static_cast<double>(cfg.model.decoder_layers);
    const double expected_approx = cfg.model.arch == "encoder-decoder" ? 12 * D * D * Le + 16 * D * D * Ld + V * D
                                   : cfg.model.arch == "decoder-only"  ? 12 * D * D * Ld + V * D
                                                                       : 12 * D * D * Le + V * D;
    const std::string approx_line = after(text, "  approximation     ");
    CHECK(count_at(approx_line.substr(approx_line.rfind("= ") + 2)) == expected_approx);
    // the exact count is the model's own
    Generator gen(0);
    const auto model = nn::make_model(model_config_from(cfg, kVocab, kVocab), gen);
    const double exact = count_at(after(text, "  exact             "));
    CHECK(exact == static_cast<double>(model->parameter_count()));
    CHECK(count_at(after(text, "  difference        ")) == exact - expected_approx);
    // the difference lines add up to it, and none is left unexplained
    CHECK(text.find("not itemised") == std::string::npos);
    std::istringstream lines(text.substr(text.find("  difference        ")));
    std::string line;
    std::getline(lines, line);
    double sum = 0;
    std::size_t items = 0;
    while (std::getline(lines, line) && line.rfind("    ", 0) == 0) {
      const std::size_t sign = line.find_first_of("+-", 30);  // the count column follows the 26-wide name
      REQUIRE(sign != std::string::npos);
      sum += count_at(line.substr(sign));
      ++items;
    }
    CHECK(items >= 2);  // biases and norms at least
    CHECK(sum == exact - expected_approx);
    // the parts, counted exactly, sum to the model's count
    const std::string parts = after(text, "  sum of the parts  ");
    CHECK(count_at(parts) == exact);
    CHECK_THAT(parts, Contains("(equal"));
    CHECK_THAT(text, Contains(cfg.model.arch));
  }
}

// arch rnn: no approximation, the parts are exact. The lecture's formulas, computed again here:
// per recurrent layer and direction G·H·(I + H + 2) (G: lstm 4, gru 3, rnn 1); the encoder D/2
// units per direction, both ways, input D at every layer; the decoder D units, its first layer
// reading D + D (embedding and context) for additive attention, else D; embeddings V_src·D +
// V_tgt·D; the bridge D -> D·Ld with bias; attention additive 2D² + D, general D², dot and none
// nothing; combine 2D -> D (none: D -> D) with bias; the output D -> V with bias.
TEST_CASE("summary rnn formulas equal the model's count for every cell and attention", "[classroom][params]") {
  const std::string config = std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/rnn-additive.toml";
  constexpr std::int64_t kVocab = 50;
  for (const std::string cell : {"lstm", "gru", "rnn"})
    for (const std::string attention : {"none", "additive", "dot", "general"}) {
      const Config cfg = load_config(config, {"model.rnn_cell=" + cell, "model.rnn_attention=" + attention, "model.d_model=12",
                                              "model.encoder_layers=2", "model.decoder_layers=3"});
      const std::string text = model_summary(cfg, kVocab, 16, 1);
      INFO(cell << " " << attention << "\n" << text);
      const double D = 12, V = kVocab, Le = 2, Ld = 3, G = cell == "lstm" ? 4 : cell == "gru" ? 3 : 1;
      const auto layer = [G](double H, double I) { return G * H * (I + H + 2); };
      const double encoder = 2 * Le * layer(D / 2, D);
      const double decoder = layer(D, attention == "additive" ? 2 * D : D) + (Ld - 1) * layer(D, D);
      const double attend = attention == "additive" ? 2 * D * D + D : attention == "general" ? D * D : 0;
      const double combine = (attention == "none" ? D : 2 * D) * D + D;
      const double formula = encoder + decoder + 2 * V * D + (D * D * Ld + D * Ld) + attend + combine + (D * V + V);
      Generator gen(0);
      const auto model = nn::make_model(model_config_from(cfg, kVocab, kVocab), gen);
      CHECK(formula == static_cast<double>(model->parameter_count()));
      // the summary prints the same parts and their sum, equal to the model's count
      CHECK(count_at(after(text, "  encoder           2·Le·G·(D/2)·(D + D/2 + 2) = ")) == encoder);
      CHECK(count_at(after(text, "  decoder           ").substr(after(text, "  decoder           ").rfind("= ") + 2)) == decoder);
      const std::string parts = after(text, "  sum of the parts  ");
      CHECK(count_at(parts) == formula);
      CHECK_THAT(parts, Contains("(equal"));
      CHECK_THAT(text, Contains(": rnn, D=12 " + cell + " cells, attention " + attention));
      CHECK_THAT(text, Contains("not computed for arch rnn") && !Contains("approximation") && !Contains("KV cache for B"));
    }
}

// ==================================================================== in Chinese (--lang zh)

namespace {

// `args` run with LANG=zh_CN.UTF-8, as on a Chinese desktop.
CliResult run_cli_in_chinese_locale(const std::vector<std::string>& args) {
  const LangEnv zh("zh_CN.UTF-8");
  return run_cli(args);
}

// `args` with "--lang VALUE" appended.
std::vector<std::string> with_lang(std::vector<std::string> args, const std::string& value) {
  args.insert(args.end(), {"--lang", value});
  return args;
}

// The first line of `text` that starts with `prefix`, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// The terminal columns (lang.h display_width) at which the cells of `line` start, from column
// `from` on: a cell is a run of characters other than the space.
std::vector<std::size_t> cell_columns(const std::string& line, std::size_t from) {
  std::vector<std::size_t> starts;
  std::size_t column = 0;
  bool after_space = true;
  for (std::size_t i = 0; i < line.size();) {
    const std::size_t start = i;
    char32_t cp = 0;
    next_code_point(line, i, cp);
    if (cp != ' ' && after_space && column >= from) starts.push_back(column);
    after_space = cp == ' ';
    column += display_width(std::string_view(line).substr(start, i - start));
  }
  return starts;
}

// The numbers of `text` in order ("170,752", "12.8", "4"): what a translation must keep.
std::vector<std::string> numbers_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) continue;
    std::size_t end = i;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == ',' || text[end] == '.')) ++end;
    while (!std::isdigit(static_cast<unsigned char>(text[end - 1]))) --end;  // "4," at the end of a clause
    out.push_back(text.substr(i, end - i));
    i = end - 1;
  }
  return out;
}

}  // namespace

TEST_CASE("display_width counts the terminal columns of UTF-8 text", "[classroom][lang]") {
  CHECK(display_width("tgt_in") == 6);
  CHECK(display_width("\u2581A") == 2);                // ▁ takes one column
  CHECK(display_width("\u2581\u6211\u4eec") == 5);     // ▁我们: two per Chinese character
  CHECK(display_width("\u3002\uff0c") == 4);           // 。， full-width punctuation
  CHECK(display_width("\u200b") == 0);                 // a zero-width space
  CHECK(display_width("e\u0301") == 1);                // e + a combining acute accent
  CHECK(display_width("\xff") == 1);                   // a byte that is not UTF-8: one replacement mark
  CHECK(pad_to_width("\u6211", 4) == "\u6211  ");       // 我 + two spaces
  CHECK(pad_left_to_width("7", 3) == "  7");
  CHECK(text(Lang::En, "parameters", "参数量") == "parameters");
  CHECK(text(Lang::Zh, "parameters", "参数量") == "参数量");
}

TEST_CASE("gradcheck --lang zh prints the rule, headings, results and summary in Chinese", "[classroom][cli][grad][lang]") {
  const std::vector<std::string> args = {"gradcheck", "--module", "layer_norm"};
  const CliResult zh = run_cli(with_lang(args, "zh")), en = run_cli(with_lang(args, "en")), plain = run_cli(args);
  INFO(zh.out << zh.err);
  REQUIRE(zh.status == 0);
  REQUIRE(en.status == 0);
  CHECK(en.out == plain.out);  // English is the default, and --lang en is it
  CHECK_THAT(en.out, Contains("max abs error") && Contains("all passed") && !Contains("模块"));
  CHECK_THAT(zh.out, Contains("float64 梯度检查") && Contains("模块") && Contains("参数或输入") && Contains("最大绝对误差") &&
                         Contains("1 项检查，") && Contains("全部通过") && !Contains("max abs error") && !Contains("all passed"));
  const GradcheckEntry& ln = *find_gradcheck("layer_norm");
  CHECK(count_of(zh.out, "通过\n") == gradcheck_rows(ln, ln.run(GradcheckOptions{})).size() + 1);  // every row, and the summary
  // the columns line up in a terminal: each heading starts where its column's cells start
  const std::string header = line_starting(zh.out, "模块");
  std::string row;  // a row whose shape has no space: "layer_norm  weight  (5,)  3.1e-10 ..."
  std::istringstream lines(zh.out);
  for (std::string line; std::getline(lines, line) && row.empty();)
    if (line.rfind("layer_norm ", 0) == 0 && line.find("(5,)") != std::string::npos) row = line;
  REQUIRE_FALSE(row.empty());
  CHECK(cell_columns(header, 0) == cell_columns(row, 0));
  // the Chinese locale without --lang gives the same, and --lang en overrides it
  CHECK(run_cli_in_chinese_locale(args).out == zh.out);
  CHECK(run_cli_in_chinese_locale(with_lang(args, "en")).out == en.out);
}

TEST_CASE("summary --lang zh prints the tree, parameter, FLOP and KV-cache headings in Chinese", "[classroom][cli][params][lang]") {
  const std::vector<std::string> args = {"summary", "--config", kReverseConfig};
  const CliResult zh = run_cli(with_lang(args, "zh")), en = run_cli(with_lang(args, "en"));
  INFO(zh.out << zh.err);
  REQUIRE(zh.status == 0);
  CHECK(en.out == run_cli(args).out);
  CHECK_THAT(en.out, Contains("Parameters of each part") && Contains("KV cache for B = 1"));
  for (const char* heading : {"的模型：encoder-decoder", "参数量：课上的近似公式与精确数并列", "各部分的参数量：公式与精确数并列",
                              "每个目标词元的前向 FLOPs，T = 32", "KV 缓存，B = 1，L = 32", "  近似值            12·D²·Le",
                              "  差值              ", "    偏置      ", "结构同 0", "（共享，已在上面计入）"})
    CHECK_THAT(zh.out, Contains(heading));
  for (const char* english : {"Parameters", "module", "difference", "KV cache", "Forward FLOPs", "same structure"})
    CHECK_THAT(zh.out, !Contains(english));
  CHECK(numbers_of(zh.out) == numbers_of(en.out));  // translated, not changed
  // the parameter counts of the module tree end in one column, under the heading's last character
  const std::size_t heading_end = display_width(line_starting(zh.out, "模块"));
  CHECK(heading_end == 74);
  for (const std::string prefix : {"model (", "├─ encoder (", "│  │  └─ 1 (EncoderLayer)  结构同 0"}) {
    const std::string line = line_starting(zh.out, prefix);
    REQUIRE_FALSE(line.empty());
    CHECK(display_width(line) == heading_end);
  }
  CHECK(run_cli_in_chinese_locale(args).out == zh.out);
}

TEST_CASE("summary in Chinese keeps every number of the English one, for every architecture", "[classroom][params][lang]") {
  const std::string configs = std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"encoder-decoder-de-en.toml", {"model.share_embeddings=false", "model.tie_output=false", "data.joint_tokenizer=false",
                                      "model.positional=learned", "model.n_kv_heads=2"}},
      {"lm-zh.toml", {"model.norm=rmsnorm", "model.activation=swiglu"}},
      {"mlm-de.toml", {}},
      {"classify-match.toml", {"data.labels=a,b,c"}},
      {"rnn-additive.toml", {}},
      {"rnn-none.toml", {"model.rnn_cell=gru"}}};
  for (const auto& [file, overrides] : cases) {
    const Config cfg = load_config(configs + file, overrides);
    const std::string en = model_summary(cfg, 500, 16, 2), zh = model_summary(cfg, 500, 16, 2, Lang::Zh);
    INFO(file << "\n" << zh);
    CHECK(numbers_of(zh) == numbers_of(en));
    CHECK_THAT(zh, Contains("参数量：") && Contains("各部分之和") && Contains("（相等：") && Contains("KV 缓存"));
    CHECK_THAT(zh, !Contains("Parameters") && !Contains("sum of the parts") && !Contains("not itemised"));
  }
}

TEST_CASE("explain-batch --lang zh explains every architecture in Chinese, tokens aligned by display width",
          "[classroom][cli][batcher][lang]") {
  TempDir run;
  const CacheHome cache;
  const std::string configs = std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/";
  // encoder-decoder on Chinese sources: row 0 in columns, every piece under its position
  const std::vector<std::string> args = {"explain-batch", "--config", configs + "tatoeba-zh-en.toml", "--rows", "2", "--set",
                                         "run.dir=" + run.path.string()};
  const CliResult zh = run_cli(with_lang(args, "zh")), en = run_cli(with_lang(args, "en"));
  INFO(zh.out << zh.err);
  REQUIRE(zh.status == 0);
  REQUIRE(en.status == 0);
  CHECK(en.out == run_cli(args).out);
  for (const char* heading : {"第 0 轮的第 0 个批次", "训练语料：保留 ", "形状：src (", "教师强制：", "第 0 行（过滤后的第 ",
                              "像解码器那样读第 0 行：", "前 8 行的填充掩码", "因果掩码", "计数：", "行数（句对）"})
    CHECK_THAT(zh.out, Contains(heading));
  CHECK_THAT(zh.out, !Contains("Teacher forcing") && !Contains("counts:") && !Contains("padding masks"));
  const std::string positions = line_starting(zh.out, "  位置 "), src = line_starting(zh.out, "  src "),
                    tgt_in = line_starting(zh.out, "  tgt_in ");
  const std::vector<std::size_t> columns = cell_columns(positions, display_width("  位置"));
  REQUIRE(columns.size() >= 5);
  const std::vector<std::size_t> src_columns = cell_columns(src, columns[0]), in_columns = cell_columns(tgt_in, columns[0]);
  REQUIRE(src_columns.size() >= 5);
  CHECK(std::equal(src_columns.begin(), src_columns.end(), columns.begin()));  // each Chinese piece under its position
  CHECK(std::equal(in_columns.begin(), in_columns.end(), columns.begin()));
  CHECK(display_width(src) > static_cast<std::size_t>(std::count_if(src.begin(), src.end(), [](char c) {
          return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
        })));  // the line holds wide (Chinese) pieces, so bytes or characters would misalign it
  CHECK(cells_of(zh.out, "src") == cells_of(en.out, "src"));  // the same pieces
  CHECK(run_cli_in_chinese_locale(args).out == zh.out);

  // decoder-only (a Chinese LM) and encoder-only (masked LM): their explanations in Chinese
  const std::string run_dir = "run.dir=" + (run.path / "other").string();
  const CliResult lm = run_cli({"explain-batch", "--config", configs + "lm-zh.toml", "--rows", "1", "--lang", "zh", "--set", run_dir});
  REQUIRE(lm.status == 0);
  CHECK_THAT(lm.out, Contains("语言建模（仅解码器）") && Contains("第 0 行（第 ") && Contains("  预测（损失）") && !Contains("counts:"));
  const std::string lm_positions = line_starting(lm.out, "  位置 "), lm_in = line_starting(lm.out, "  tgt_in ");
  const std::vector<std::size_t> lm_columns = cell_columns(lm_positions, display_width("  位置"));
  const std::vector<std::size_t> lm_in_columns = cell_columns(lm_in, lm_columns.at(0));
  CHECK(std::equal(lm_in_columns.begin(), lm_in_columns.end(), lm_columns.begin()));
  const CliResult mlm = run_cli({"explain-batch", "--config", configs + "mlm-de.toml", "--rows", "1", "--lang", "zh", "--set", run_dir});
  REQUIRE(mlm.status == 0);
  CHECK_THAT(mlm.out, Contains("掩码语言模型（仅编码器") && Contains("  原词元 ") && !Contains("Masked LM"));
}

TEST_CASE("plot --lang zh writes the figures' titles, axes and legends in Chinese", "[classroom][cli][plots][lang]") {
  TempDir run;
  write_file(run.path / "metrics.tsv",
             "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\n"
             "10\t1\ttrain\t4.5\t4.2\t66.7\t0.001\t900\t1.5\t\t3\n"
             "20\t1\tvalid\t3.3\t3.0\t20.1\t\t\t\t12.5\t7\n");
  const fs::path zh = run.path / "zh.svg", en = run.path / "en.svg", locale = run.path / "locale.svg";
  REQUIRE(run_cli({"plot", run.path.string(), "--out", zh.string(), "--lang", "zh"}).status == 0);
  REQUIRE(run_cli({"plot", run.path.string(), "--out", en.string(), "--lang", "en"}).status == 0);
  REQUIRE(run_cli_in_chinese_locale({"plot", run.path.string(), "--out", locale.string()}).status == 0);
  const std::string zh_doc = read_file(zh), en_doc = read_file(en);
  require_svg_document(zh_doc);
  CHECK_THAT(zh_doc, Contains(">训练曲线</text>") && Contains(">损失：标签平滑后的损失与 NLL</text>") && Contains(">训练损失</text>") &&
                         Contains(">验证 BLEU</text>") && Contains(">学习率</text>") && !Contains("Training curves"));
  CHECK_THAT(en_doc, Contains(">Training curves</text>") && !Contains("训练"));
  CHECK(read_file(locale) == zh_doc);

  const fs::path schedule = run.path / "schedule.svg", positions = run.path / "positions.svg";
  REQUIRE(run_cli({"plot", "--config", kReverseConfig, "--what", "schedule", "--out", schedule.string(), "--lang", "zh"}).status == 0);
  REQUIRE(run_cli({"plot", "--config", kReverseConfig, "--what", "positions", "--out", positions.string(), "--lang", "zh"}).status == 0);
  CHECK_THAT(read_file(schedule), Contains("学习率调度：cosine，lr ") && Contains(">步</text>") && Contains(">学习率</text>"));
  CHECK_THAT(read_file(positions), Contains("正弦位置编码 PE[pos, i]，max_len 64，d_model 64") && Contains(">嵌入维度</text>"));
}

TEST_CASE("attention --lang zh titles its figures and says what it drew in Chinese", "[classroom][cli][attention][lang]") {
  TempDir out, out_en;
  const std::string ck = tiny_checkpoint().string();
  const CliResult zh = run_cli({"attention", "--checkpoint", ck, "--src", "wa mi lo ka", "--out-dir", out.path.string(), "--lang", "zh"});
  INFO(zh.out << zh.err);
  REQUIRE(zh.status == 0);
  CHECK_THAT(zh.out, Contains("译文（贪心解码）：") && Contains((out.path / "cross_attention.svg").string()));
  const std::string cross = read_file(out.path / "cross_attention.svg"), overview = read_file(out.path / "attention_overview.svg");
  require_svg_document(cross);
  CHECK_THAT(cross, Contains("交叉注意力，行 = 产生的词元：") && Contains(">第 2 层第 2 个头</text>") && Contains(">权重</text>") &&
                        Contains("行：查询（谁在看）") && !Contains("layer 1, head 1") && !Contains("Cross-attention"));
  CHECK_THAT(overview, Contains("编码器第 1 层第 1 个头：双向") && Contains("解码器第 2 层第 1 个头：因果"));
  CHECK_THAT(read_file(out.path / "encoder_self_attention.svg"), Contains("编码器自注意力（双向），行 = 源端位置"));
  CHECK_THAT(read_file(out.path / "self_attention.svg"), Contains("掩码自注意力，行 = 产生的词元") && Contains(">遮蔽</text>"));
  // the Chinese locale without --lang gives the same figures; --lang en the English ones
  const CliResult locale = run_cli_in_chinese_locale({"attention", "--checkpoint", ck, "--src", "wa mi lo ka", "--out-dir",
                                                      out_en.path.string(), "--tgt", "ka lo"});
  REQUIRE(locale.status == 0);
  CHECK_THAT(locale.out, Contains("目标句（教师强制）：ka lo"));
  CHECK_THAT(read_file(out_en.path / "cross_attention.svg"), Contains("交叉注意力，行 = 产生的词元"));
  const CliResult en = run_cli({"attention", "--checkpoint", ck, "--src", "wa mi lo ka", "--out-dir", out_en.path.string(), "--lang", "en"});
  REQUIRE(en.status == 0);
  CHECK_THAT(en.out, Contains("translation (greedy): "));
  CHECK_THAT(read_file(out_en.path / "cross_attention.svg"), Contains("layer 1, head 1") && !Contains("交叉注意力"));
}
