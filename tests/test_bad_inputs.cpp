// Bad input gets a clear error, exit status 2, and nothing damaged: the gaps left by the error
// tests of the single modules (test_config.cpp, test_corpus.cpp, test_safetensors.cpp,
// test_tokenizer.cpp, test_training.cpp, test_classroom.cpp), exercised through the scratchformer
// program where a student meets them:
//   configs      mistakes not yet run through the binary: unknown section, TOML syntax error,
//                missing required key, n_heads % n_kv_heads, zero and negative sizes
//   corpora      a 10 MB single line: filtered with a count, no crash, no huge memory
//   checkpoints  damaged files given to translate and to --resume (truncated, header length,
//                malformed header, offsets, checksum), tensors whose dtype or shape does not match
//                the config, a vocabulary that does not match the tokenizer; the file untouched
//   tokenizer    spm.model missing or corrupt beside a checkpoint (translate) and in a run being
//                resumed
//   translate    input with invalid UTF-8, empty lines and very long lines: one output line per
//                input line, warnings on stderr, exit status 0, from a file and from stdin
//   command line missing or malformed options, beam size 0, unknown options and commands
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "data/corpus.h"
#include "checkpoint_util.h"
#include "run_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/safetensors.h"

using namespace sf;
using namespace sf::test;
using Catch::Contains;

namespace {

// The first tensor of the model (not of the optimizer).
std::size_t first_weight(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].first.rfind("optimizer.", 0) != 0) return i;
  FAIL("no model tensor");
  return 0;
}

// `count` words of the reverse task's vocabulary, space separated.
std::string words(std::size_t count) {
  const char* vocab[] = {"lo", "be", "co", "da", "fi"};
  std::string s;
  for (std::size_t i = 0; i < count; ++i) s += (i ? " " : "") + std::string(vocab[i % 5]);
  return s;
}

std::size_t line_count(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

// ---- configs --------------------------------------------------------------------------------

TEST_CASE("config mistakes through the program exit 2 with one line and create no run directory",
          "[errors][config][cli]") {
  // test_config.cpp checks each message in-process and test_training.cpp runs unknown key, wrong
  // type and d_model % n_heads through the program; these are the other kinds.
  TempDir tmp;
  const std::string run = tmp / "run";
  const std::string required = "[data]\ntrain_src = \"" + kReverseData + "train.src\"\ntrain_tgt = \"" + kReverseData +
                               "train.tgt\"\nvalid_src = \"" + kReverseData + "valid.src\"\nvalid_tgt = \"" +
                               kReverseData + "valid.tgt\"\n\n[run]\ndir = \"" + run + "\"\n";
  struct Case {
    const char* what;
    std::string toml;
    std::string set;  // an override, or ""
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"unknown section", "[modle]\nd_model = 32\n" + required, "", {":1:", "unknown section [modle]", "[model]"}},
      {"TOML syntax error", "[model]\nd_model = 32\nn_heads = = 4\n" + required, "", {":3:", "syntax error"}},
      {"missing required key", "[run]\ndir = \"" + run + "\"\n", "", {"data.train_src", "required key is missing"}},
      {"n_heads % n_kv_heads", "[model]\nn_heads = 8\nn_kv_heads = 3\n" + required, "",
       {"model.n_kv_heads", "not divisible by n_kv_heads 3"}},
      {"zero size", "[model]\nd_ff = 0\n" + required, "", {":2:", "model.d_ff", "positive integer, got 0"}},
      {"negative size override", required, "train.max_steps=-10", {"--set train.max_steps=-10", "got -10"}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string path = tmp.write("bad.toml", c.toml);
    std::vector<std::string> expected = c.expected;
    expected.push_back(path);
    check_one_line_error(run_cli("train --config " + quoted(path) + (c.set.empty() ? "" : " --set " + quoted(c.set)), tmp),
                         expected);
    CHECK_FALSE(fs::exists(run));
  }
}

TEST_CASE("bf16 on a CPU without bf16 units exits 2 with one line naming what is missing", "[errors][bf16][cli]") {
  // SCRATCHFORMER_BF16_UNITS=none hides the units (cpu_features.h), so this runs on every CPU
  TempDir tmp;
  const std::string run = tmp / "run";
  ::setenv("SCRATCHFORMER_BF16_UNITS", "none", 1);
  const CliResult train = run_cli(train_args(small_reverse_run(tmp, run, {"train.precision=bf16"})), tmp);
  const CliResult translate = run_cli("translate --precision bf16 --checkpoint " + quoted(tmp / "none.safetensors"), tmp);
  const CliResult eval = run_cli("eval --precision bf16 --checkpoint " + quoted(tmp / "none.safetensors") + " --src " +
                                     quoted(tmp / "none.de") + " --ref " + quoted(tmp / "none.en"),
                                 tmp);
  ::unsetenv("SCRATCHFORMER_BF16_UNITS");
  check_one_line_error(train, {"train.precision = \"bf16\" needs a CPU with bf16 matrix units, AMX-BF16 or AVX512-BF16",
                               "SCRATCHFORMER_BF16_UNITS=none", "Use float32"});
  CHECK_FALSE(fs::exists(run));  // refused before anything was written
  check_one_line_error(translate, {"--precision bf16 needs a CPU with bf16 matrix units"});
  check_one_line_error(eval, {"--precision bf16 needs a CPU with bf16 matrix units"});
}

// ---- corpora --------------------------------------------------------------------------------

TEST_CASE("a 10 MB single line in the training corpus is filtered with a count", "[errors][corpus]") {
  // test_corpus.cpp covers a missing file, unequal line counts, invalid UTF-8 and an empty corpus.
  // Here the first training pair is one line of 10 MB (two million words): training must drop it
  // (counted in the log), finish, and not need memory in proportion to the line's tokens.
  constexpr std::size_t kLineBytes = 10u << 20;
  // The run itself needs far less; tokenising the line would take GBs, which is why it is dropped
  // unread (data::kMaxBytesPerToken). 600 MB leaves room for AddressSanitizer's shadow and quarantine.
  constexpr long kMaxResidentKb = 600 * 1024;
  TempDir tmp;
  const std::string run = tmp / "run";
  auto overrides = small_reverse_run(tmp, run, {"train.max_steps=2", "train.valid_every=2"});
  std::string huge = words(kLineBytes / 3);
  huge.resize(kLineBytes, 'o');
  tmp.write("train.src", huge + "\n" + first_lines(kReverseData + "train.src", 299));
  tmp.write("train.tgt", huge + "\n" + first_lines(kReverseData + "train.tgt", 299));
  // the run in a child of our own, so wait4 reports its peak memory (and its shell's) alone
  const std::string cmd = "SCRATCHFORMER_NUM_THREADS=1 " + quoted(SCRATCHFORMER_BINARY) + " " + train_args(overrides) +
                          " </dev/null >" + quoted(tmp / "out.txt") + " 2>" + quoted(tmp / "err.txt");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(101);
  }
  int status = 0;
  rusage usage{};
  REQUIRE(wait4(pid, &status, 0, &usage) == pid);
  const std::string out = read_file(tmp / "out.txt");
  INFO("stdout: " << out << "\nstderr: " << read_file(tmp / "err.txt"));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK_THAT(out, Contains("train: kept 299 of 300 pairs") && Contains("1 longer than"));
  CHECK(usage.ru_maxrss < kMaxResidentKb);
}

TEST_CASE("drop_overlong_pairs drops pairs too long to tokenise and keeps the rest aligned", "[errors][corpus]") {
  // max_tokens 2: a side over 2 * kMaxBytesPerToken = 512 bytes cannot be 2 tokens
  constexpr std::int64_t kMaxTokens = 2;
  const std::size_t limit = kMaxTokens * data::kMaxBytesPerToken;
  data::ParallelCorpus c;
  c.src = {"a", std::string(limit + 1, 'x'), "b", std::string(limit, 'y'), "c"};
  c.tgt = {"A", "B", std::string(limit + 1, 'z'), "D", "E"};
  CHECK(data::drop_overlong_pairs(c, kMaxTokens) == 2);
  CHECK(c.src == std::vector<std::string>{"a", std::string(limit, 'y'), "c"});
  CHECK(c.tgt == std::vector<std::string>{"A", "D", "E"});

  auto all_long = [&] {  // a fresh one per call: a call empties it
    data::ParallelCorpus a;
    a.src_path = "s.txt", a.tgt_path = "t.txt";
    a.src = {std::string(limit + 1, 'x')};
    a.tgt = {"X"};
    return a;
  };
  data::ParallelCorpus a = all_long(), b = all_long();
  REQUIRE_THROWS_AS(data::drop_overlong_pairs(a, kMaxTokens), data::CorpusError);
  REQUIRE_THROWS_WITH(data::drop_overlong_pairs(b, kMaxTokens),
                      Contains("s.txt") && Contains("t.txt") && Contains("longer than 512 bytes"));
  REQUIRE_THROWS_AS(data::drop_overlong_pairs(c, 0), std::invalid_argument);
}

// ---- checkpoints ----------------------------------------------------------------------------

TEST_CASE("damaged or mismatched checkpoints given to translate exit 2 with one line", "[errors][checkpoint][cli]") {
  // test_safetensors.cpp checks each reader message in-process; this runs the kinds of damage
  // through the program, and the mismatches only the program can see (config, tokenizer).
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string good = run + "/checkpoint-best.safetensors";
  const std::string bytes = read_file(good);
  const std::uint64_t header_len = header_length(bytes);
  const std::string input = tmp.write("in.txt", "lo be co\n");
  const std::string bad = run + "/bad.safetensors";  // beside spm.model, as a real checkpoint would be
  auto translate = [&] { return run_cli("translate --checkpoint " + quoted(bad) + " --input " + quoted(input), tmp); };

  struct Damage {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  std::string flipped = bytes;
  flipped[bytes.size() - 2] ^= 0x01;
  std::string bad_json = bytes;
  bad_json[8] = '[';  // the header's opening brace
  std::string bad_offsets = bytes;
  {
    const std::string header = bytes.substr(8, header_len);
    const auto at = header.find("\"data_offsets\":[0,");
    REQUIRE(at != std::string::npos);
    std::string edited = header;
    edited.replace(at, 18, "\"data_offsets\":[9,");  // same length, no longer tiles from 0
    bad_offsets.replace(8, header_len, edited);
  }
  const std::vector<Damage> damages = {
      {"empty file", "", "too short"},
      {"truncated in the header length", bytes.substr(0, 5), "too short"},
      {"truncated in the header", bytes.substr(0, 8 + header_len / 2), "header length"},
      {"truncated at the end of the header", bytes.substr(0, 8 + header_len), "beyond the data section"},
      {"truncated in the data", bytes.substr(0, bytes.size() - 100), "beyond the data section"},
      {"header length larger than the file", with_header_length(bytes, 1ull << 40), "header length"},
      {"malformed JSON header", bad_json, "malformed JSON header"},
      {"tensor offsets out of place", bad_offsets, "data_offsets"},
      {"checksum mismatch", flipped, "checksum mismatch"},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    write_file(bad, d.bytes);
    check_one_line_error(translate(), {bad, d.expected});
  }

  SECTION("a weight with the wrong shape") {
    save_edited(good, bad, [](auto& tensors, auto&) {
      auto& [name, t] = tensors[first_weight(tensors)];
      t = sf::zeros({t.size(0) + 1, t.size(-1)});
    });
    check_one_line_error(translate(), {bad, "has shape"});
  }
  SECTION("a weight with the wrong dtype") {
    save_edited(good, bad, [](auto& tensors, auto&) {
      auto& [name, t] = tensors[first_weight(tensors)];
      t = t.to(Dtype::Float64);
    });
    check_one_line_error(translate(), {bad, "float64 but the model's parameter is float32"});
  }
  SECTION("a vocabulary that differs from the tokenizer beside it") {
    save_edited(good, bad, [](auto&, auto& meta) { meta["src_vocab"] = "1000", meta["tgt_vocab"] = "1000"; });
    check_one_line_error(translate(), {bad, "vocabulary"});
  }
  SECTION("a config in the metadata that is not valid") {
    save_edited(good, bad, [](auto&, auto& meta) { meta["config"] = "[model]\nd_model = \"big\"\n"; });
    check_one_line_error(translate(), {bad, "config stored in the checkpoint is invalid"});
  }
  CHECK(read_file(good) == bytes);  // the good checkpoint was only read
}

TEST_CASE("resume from a damaged or mismatched checkpoint-last exits 2 and leaves it untouched",
          "[errors][checkpoint][cli]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string last = run + "/checkpoint-last.safetensors";
  const std::string good = read_file(last);
  auto resume = [&](const std::vector<std::string>& extra) {
    auto o = small_reverse_run(tmp, run, {"train.max_steps=6", "train.valid_every=2"});
    o.insert(o.end(), extra.begin(), extra.end());
    return run_cli(train_args(o) + " --resume", tmp);
  };
  SECTION("truncated") {
    const std::string cut = good.substr(0, good.size() / 2);
    write_file(last, cut);
    check_one_line_error(resume({}), {last, "beyond the data section"});
    CHECK(read_file(last) == cut);
  }
  SECTION("checksum mismatch") {
    std::string flipped = good;
    flipped[good.size() / 2 + good.size() / 4] ^= 0x40;
    write_file(last, flipped);
    check_one_line_error(resume({}), {last, "checksum mismatch"});
    CHECK(read_file(last) == flipped);
  }
  SECTION("a config whose model shape differs") {
    check_one_line_error(resume({"model.d_ff=48"}), {last, "does not match the config", "has shape"});
    CHECK(read_file(last) == good);
  }
  SECTION("an optimizer state tensor of the wrong dtype") {
    save_edited(last, last, [](auto& tensors, auto&) {
      for (auto& [name, t] : tensors)
        if (name.rfind("optimizer.", 0) == 0) {
          t = t.to(Dtype::Float64);
          break;
        }
    });
    const std::string edited = read_file(last);
    check_one_line_error(resume({}), {last, "optimizer.", "float64 but the model's parameter is float32"});
    CHECK(read_file(last) == edited);
  }
}

// ---- tokenizers -----------------------------------------------------------------------------

TEST_CASE("a missing or corrupt tokenizer model beside a checkpoint exits 2 with one line", "[errors][tokenizer][cli]") {
  // test_tokenizer.cpp checks Tokenizer::load's messages; here translate and --resume meet them.
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string spm = run + "/spm.model", last = run + "/checkpoint-last.safetensors";
  const std::string last_bytes = read_file(last);
  const std::string input = tmp.write("in.txt", "lo be co\n");
  auto translate = [&] { return run_cli("translate --checkpoint " + quoted(last) + " --input " + quoted(input), tmp); };
  auto resume = [&] {
    return run_cli(train_args(small_reverse_run(tmp, run, {"train.max_steps=6", "train.valid_every=2"})) + " --resume", tmp);
  };
  SECTION("missing") {
    fs::remove(spm);
    check_one_line_error(translate(), {spm, "tokenizer model not found"});
    // a resumed run must not silently train a new tokenizer
    check_one_line_error(resume(), {spm, "tokenizer model not found"});
    CHECK_FALSE(fs::exists(spm));
  }
  SECTION("corrupt") {
    write_file(spm, "this is not a SentencePiece model\n\x01\x02\xff");
    check_one_line_error(translate(), {spm, "not a valid SentencePiece model"});
    check_one_line_error(resume(), {spm, "not a valid SentencePiece model"});
  }
  SECTION("truncated") {
    const std::string model = read_file(spm);
    write_file(spm, model.substr(0, model.size() / 3));
    check_one_line_error(translate(), {spm});
  }
  CHECK(read_file(last) == last_bytes);
}

// ---- translate input ------------------------------------------------------------------------

TEST_CASE("translate keeps one output line per input line for invalid UTF-8 empty and very long lines",
          "[errors][translate][cli]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string ck = run + "/checkpoint-best.safetensors";
  // lines: 1 ordinary, 2 empty, 3 invalid UTF-8 (a Latin-1 byte), 4 blank, 5 very long (20000
  // words, far beyond max_len 64), 6 ordinary, 7 only "\r" (a Windows empty line), 8 a lone
  // continuation byte
  const std::vector<std::string> lines = {"lo be co", "", "lo b\xE4 co", "   ", words(20000), "da fi", "\r", "\x80"};
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  const std::string input = tmp.write("in.txt", text);

  for (const bool from_stdin : {false, true}) {
    INFO((from_stdin ? "stdin" : "--input"));
    const CliResult r = from_stdin ? run_cli("translate --checkpoint " + quoted(ck), tmp, input)
                                   : run_cli("translate --checkpoint " + quoted(ck) + " --input " + quoted(input), tmp);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    REQUIRE(line_count(r.out) == lines.size());
    std::vector<std::string> out;
    std::istringstream os(r.out);
    for (std::string l; std::getline(os, l);) out.push_back(l);
    CHECK(out[1].empty());  // empty in, empty out
    CHECK(out[2].empty());  // not UTF-8: an empty translation and a warning
    CHECK(out[6].empty());
    CHECK(out[7].empty());
    CHECK_THAT(r.err, Contains("line 3: invalid UTF-8 at byte 5"));
    CHECK_THAT(r.err, Contains("line 5:") && Contains("truncated to the model's limit"));
    CHECK_THAT(r.err, Contains("line 8: invalid UTF-8 at byte 1"));
    CHECK(line_count(r.err) == 3);  // one warning each, nothing else
  }
  SECTION("an input file that does not exist") {
    check_one_line_error(run_cli("translate --checkpoint " + quoted(ck) + " --input " + quoted(tmp / "none.txt"), tmp),
                         {tmp / "none.txt", "not found"});
  }
  SECTION("an input that is a directory") {
    check_one_line_error(run_cli("translate --checkpoint " + quoted(ck) + " --input " + quoted(tmp.path.string()), tmp),
                         {"is a directory"});
  }
  SECTION("empty input") {
    const CliResult r = run_cli("translate --checkpoint " + quoted(ck), tmp);
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
  }
}

// ---- command lines --------------------------------------------------------------------------

TEST_CASE("command lines with missing malformed or unknown options exit 2 with one line", "[errors][cli]") {
  // test_training.cpp covers train without --config, translate --bogus, translate with a missing
  // checkpoint and --resume without a checkpoint; test_classroom.cpp plot's conflicting options.
  // (translate has no conflicting options: --input FILE, or stdin when it is absent or "-".)
  TempDir tmp;
  const std::string x = tmp.write("x.safetensors", "");
  struct Case {
    std::string args;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"translate --input /dev/null", {"--checkpoint", "required"}},
      {"translate --checkpoint " + x + " --beam 0", {"--beam", "at least 1, got '0'"}},
      {"translate --checkpoint " + x + " --beam -3", {"--beam"}},
      {"translate --checkpoint " + x + " --beam wide", {"--beam", "wide"}},
      {"translate --checkpoint " + x + " --length-penalty much", {"--length-penalty", "much"}},
      {"translate --checkpoint " + x + " --length-penalty 9", {"expected a length penalty alpha in [0, 5], got '9'"}},
      {"tune-beam --checkpoint " + x + " --penalties 0,7", {"--penalties", "in [0, 5], got '7'"}},
      {"tune-beam --checkpoint " + x + " --max-sentences -1", {"--max-sentences", "at least 0, got '-1'"}},
      {"serve --port 70000", {"--port", "expected a port in [0, 65535], got '70000'"}},
      {"translate --checkpoint", {"--checkpoint"}},
      {"translate --checkpoint " + x + " extra-word", {"extra-word"}},
      {"eval --checkpoint " + x + " --src a", {"--ref", "requires"}},
      {"eval --checkpoint " + x + " --src a --ref b --beam 0", {"--beam"}},
      {"eval --checkpoint " + x + " --src a --ref b --precision fp8", {"--precision", "fp8"}},
      {"translate --checkpoint " + x + " --precision fp8", {"--precision", "fp8"}},
      {"bleu --ref a --tokenize intl", {"--tokenize", "intl"}},
      {"serve --runs no-such-folder --port 0", {"--runs", "no such folder", "no-such-folder"}},
      {"serve --runs " + x + " --port 0", {"--runs", "expected a folder", "got a file"}},
      {"bench --config " + kSourceDir + "/configs/bench.toml --decode-batch -1", {"--decode-batch", ">= 0", "got -1"}},
      {"train --config a.toml --resume=maybe", {"--resume"}},
      {"trian --config a.toml", {"scratchformer has no command trian", "did you mean train?"}},
      {"--no-such-flag", {"scratchformer has no option --no-such-flag"}},
      // a mistyped option is named before the required one it left missing, with the closest
      {"bleu --refs a", {"bleu has no option --refs", "did you mean --ref?"}},
      {"bleu --refs=a", {"bleu has no option --refs", "did you mean --ref?"}},
      {"translate --checkpont " + x, {"translate has no option --checkpont", "did you mean --checkpoint?"}},
      {"train --config a.toml --stesp 3", {"train has no option --stesp"}},
  };
  for (const Case& c : cases) {
    INFO("scratchformer " << c.args);
    check_one_line_error(run_cli(c.args, tmp), c.expected);
  }
}

// ---- tasks (train/task.h) ---------------------------------------------------------------------

namespace {

// A classify config in `tmp` reading train.tsv and valid.tsv (written by the caller): an
// encoder-only model, D 32, one layer, a 48-piece vocabulary, two steps.
std::string classify_config(const TempDir& tmp) {
  return tmp.write("classify.toml",
                   "[model]\narch = \"encoder-only\"\nd_model = 32\nd_ff = 64\nencoder_layers = 1\nmax_len = 64\n\n"
                   "[data]\ntask = \"classify\"\ntrain_file = \"train.tsv\"\nvalid_file = \"valid.tsv\"\n"
                   "labels = \"no,yes\"\ntokenizer_vocab_size = 48\n\n"
                   "[train]\nmax_steps = 2\nbest_metric = \"accuracy\"\n\n[run]\ndir = \"run\"\nthreads = 1\n");
}

// The first `n` source lines of the reverse corpus labelled no, yes, no, ...; line `bad_line`
// (1-based, 0 = none) replaced by `bad`.
std::string labelled_lines(int n, int bad_line = 0, const std::string& bad = "") {
  std::istringstream in(first_lines(kReverseData + "train.src", n));
  std::string out, line;
  for (int i = 1; std::getline(in, line); ++i) out += (i == bad_line ? bad : (i % 2 ? "no\t" : "yes\t") + line) + "\n";
  return out;
}

}  // namespace

TEST_CASE("task mistakes in a config or a classification file exit 2 with one line", "[errors][tasks][cli]") {
  TempDir tmp;
  SECTION("a task the architecture does not train") {
    const std::string path = tmp.write("lm.toml",
                                       "[model]\narch = \"encoder-decoder\"\n\n[data]\ntask = \"lm\"\ntrain_file = \"t.txt\"\n"
                                       "valid_file = \"v.txt\"\n\n[train]\nbest_metric = \"loss\"\n\n[run]\ndir = \"run\"\n");
    check_one_line_error(run_cli("train --config " + quoted(path), tmp),
                         {path, "data.task", "\"lm\"", "model.arch is \"encoder-decoder\""});
    CHECK_FALSE(fs::exists(tmp / "run"));
  }
  SECTION("an unknown label in the training file") {
    tmp.write("train.tsv", labelled_lines(300, 7, "maybe\tlo be co"));
    tmp.write("valid.tsv", labelled_lines(20));
    check_one_line_error(run_cli("train --config " + quoted(classify_config(tmp)), tmp),
                         {tmp / "train.tsv" + " line 7", "unknown label \"maybe\"", "no, yes"});
  }
  SECTION("a training line without a tab") {
    tmp.write("train.tsv", labelled_lines(300, 5, "no lo be co"));
    tmp.write("valid.tsv", labelled_lines(20));
    check_one_line_error(run_cli("train --config " + quoted(classify_config(tmp)), tmp),
                         {tmp / "train.tsv" + " line 5", "found no tab"});
  }
  SECTION("a valid line of four fields") {
    tmp.write("train.tsv", labelled_lines(300));
    tmp.write("valid.tsv", labelled_lines(20, 2, "yes\tlo\tbe\tco"));
    check_one_line_error(run_cli("train --config " + quoted(classify_config(tmp)), tmp),
                         {tmp / "valid.tsv" + " line 2", "found 4"});
  }
  CHECK_FALSE(fs::exists(tmp / "run/checkpoint-last.safetensors"));
}

TEST_CASE("commands of other tasks refuse a translation checkpoint with one line", "[errors][tasks][cli]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string ck = run + "/checkpoint-best.safetensors";
  const std::string holds = "holds an encoder-decoder model trained with data.task = \"translation\"";
  check_one_line_error(run_cli("generate --checkpoint " + quoted(ck) + " --prompt 'lo be'", tmp),
                       {"generate needs a decoder-only model", ck, holds});
  check_one_line_error(run_cli("fill-mask --checkpoint " + quoted(ck) + " --text 'lo <mask>'", tmp),
                       {"fill-mask needs an encoder-only model trained with data.task = \"mlm\"", ck, holds});
  check_one_line_error(run_cli("classify --checkpoint " + quoted(ck) + " --input /dev/null", tmp),
                       {"classify needs an encoder-only model trained with data.task = \"classify\"", ck, holds});
  check_one_line_error(run_cli("eval --checkpoint " + quoted(ck) + " --input /dev/null", tmp),
                       {"eval: a translation model takes --src FILE and --ref FILE"});
}

TEST_CASE("commands that need another model refuse an rnn checkpoint with one line", "[errors][tasks][cli][recurrent]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  const CliResult trained = run_cli(train_args(small_reverse_run(tmp, run, {"model.arch=rnn", "run.attention_snapshots=false",
                                                                            "train.max_steps=2", "train.valid_every=2"})),
                                    tmp);
  INFO("training stdout: " << trained.out << "\nstderr: " << trained.err);
  REQUIRE(trained.status == 0);
  const std::string ck = run + "/checkpoint-best.safetensors";
  const std::string holds = "holds an rnn model trained with data.task = \"translation\"";
  check_one_line_error(run_cli("generate --checkpoint " + quoted(ck) + " --prompt 'lo be'", tmp),
                       {"generate needs a decoder-only model", ck, holds});
  check_one_line_error(run_cli("fill-mask --checkpoint " + quoted(ck) + " --text 'lo <mask>'", tmp),
                       {"fill-mask needs an encoder-only model trained with data.task = \"mlm\"", ck, holds});
  check_one_line_error(run_cli("classify --checkpoint " + quoted(ck) + " --input /dev/null", tmp),
                       {"classify needs an encoder-only model trained with data.task = \"classify\"", ck, holds});
  // attention draws the rnn's alignment (its one attention, no self-attention)
  const CliResult drawn = run_cli("attention --checkpoint " + quoted(ck) + " --src 'lo be' --out-dir " + quoted(tmp / "att"), tmp);
  INFO("attention stderr: " << drawn.err);
  CHECK(drawn.status == 0);
  CHECK(fs::exists(tmp / "att/cross_attention.svg"));
  CHECK_FALSE(fs::exists(tmp / "att/self_attention.svg"));
  // ... unless the model has none: the bottleneck has no weights to draw
  const std::string none_run = tmp / "none";
  const CliResult none_trained = run_cli(
      train_args(small_reverse_run(tmp, none_run, {"model.arch=rnn", "model.rnn_attention=none", "run.attention_snapshots=false",
                                                   "train.max_steps=2", "train.valid_every=2"})),
      tmp);
  REQUIRE(none_trained.status == 0);
  check_one_line_error(run_cli("attention --checkpoint " + quoted(none_run + "/checkpoint-best.safetensors") +
                                   " --src 'lo be' --out-dir " + quoted(tmp / "att-none"),
                               tmp),
                       {"attention: this rnn model has model.rnn_attention = \"none\"", "expected a model with additive, dot or general attention"});
  CHECK_FALSE(fs::exists(tmp / "att-none"));
  // and it translates as the encoder-decoder does
  const std::string input = tmp.write("in.txt", "lo be co\n\nda fi\n");
  const CliResult translated = run_cli("translate --checkpoint " + quoted(ck) + " --input " + quoted(input), tmp);
  INFO("translate stderr: " << translated.err);
  CHECK(translated.status == 0);
  CHECK(line_count(translated.out) == 3);
}

TEST_CASE("rnn options in a Transformer's config and Transformer commands on an rnn config exit 2 with one line",
          "[errors][config][cli]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  const std::string required = "[data]\ntrain_src = \"" + kReverseData + "train.src\"\ntrain_tgt = \"" + kReverseData +
                               "train.tgt\"\nvalid_src = \"" + kReverseData + "valid.src\"\nvalid_tgt = \"" +
                               kReverseData + "valid.tgt\"\n\n[run]\ndir = \"" + run + "\"\n";
  const std::string transformer = tmp.write("transformer.toml", "[model]\nd_model = 32\nrnn_attention = \"additive\"\n" + required);
  check_one_line_error(run_cli("train --config " + quoted(transformer), tmp),
                       {transformer + ":3: model.rnn_attention: only model.arch = \"rnn\" reads this key, but model.arch is "
                                      "\"encoder-decoder\""});
  const std::string rnn = tmp.write("rnn.toml", "[model]\narch = \"rnn\"\nd_model = 32\n" + required);
  check_one_line_error(run_cli("train --config " + quoted(rnn) + " --set model.rnn_attention=bahdanau", tmp),
                       {"--set model.rnn_attention=bahdanau: expected one of none, additive, dot, general, got \"bahdanau\""});
  check_one_line_error(run_cli("explain-batch --config " + quoted(rnn), tmp),
                       {"explain-batch: needs a Transformer (arch encoder-decoder, decoder-only or encoder-only), got arch rnn"});
  // bench runs an rnn config (its own table, rnn_bench.h), but not the Transformer's other tables
  check_one_line_error(run_cli("bench --config " + quoted(rnn) + " --scaling", tmp),
                       {"bench: --scaling is for a Transformer; an rnn config's length table is part of plain bench"});
  check_one_line_error(run_cli("bench --config " + quoted(rnn) + " --generation", tmp),
                       {"bench: --generation is for a Transformer"});
  CHECK_FALSE(fs::exists(run));
  // summary prints the rnn's parameter formulas
  const CliResult summary = run_cli("summary --config " + quoted(rnn), tmp);
  CHECK(summary.status == 0);
  CHECK_THAT(summary.out, Contains("2·Le·G·(D/2)·(D + D/2 + 2)") && Contains("(equal"));
}
