// Helpers for the tests that run whole training jobs or the scratchformer program
// (test_kill_resume.cpp, test_bad_inputs.cpp): temporary folders, files, a small copy of the
// reverse task, and running the real binary with its exit status and output captured.
#pragma once

#include <stdlib.h>    // mkdtemp
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util.h"

namespace sf::test {

namespace fs = std::filesystem;

inline const std::string kSourceDir = SCRATCHFORMER_SOURCE_DIR;
inline const std::string kReverseConfig = kSourceDir + "/configs/reverse.toml";
inline const std::string kReverseData = kSourceDir + "/data/corpora/reverse/";

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The first `n` lines of a file, each ending in '\n'.
inline std::string first_lines(const std::string& path, int n) {
  std::ifstream in(path);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

// A small copy of the reverse corpus (300 training pairs, 16 validation pairs) in `tmp`, and the
// overrides that make configs/reverse.toml train on it in about a second: D 32, one layer each,
// 256-token batches (11 per epoch), one thread, no test set. `extra` overrides come last.
inline std::vector<std::string> small_reverse_run(const TempDir& tmp, const std::string& run_dir,
                                                  const std::vector<std::string>& extra = {}) {
  if (!fs::exists(tmp / "train.src")) {
    tmp.write("train.src", first_lines(kReverseData + "train.src", 300));
    tmp.write("train.tgt", first_lines(kReverseData + "train.tgt", 300));
    tmp.write("valid.src", first_lines(kReverseData + "valid.src", 16));
    tmp.write("valid.tgt", first_lines(kReverseData + "valid.tgt", 16));
  }
  std::vector<std::string> o = {"run.dir=" + run_dir,
                                "data.train_src=" + tmp / "train.src",
                                "data.train_tgt=" + tmp / "train.tgt",
                                "data.valid_src=" + tmp / "valid.src",
                                "data.valid_tgt=" + tmp / "valid.tgt",
                                "data.test_src=\"\"",
                                "data.test_tgt=\"\"",
                                "data.batch_tokens=256",
                                "model.d_model=32",
                                "model.d_ff=64",
                                "model.encoder_layers=1",
                                "model.decoder_layers=1",
                                "model.dropout=0.1",
                                "run.threads=1",
                                "train.log_every=5"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

// `train --config reverse.toml --set ...` for the overrides, quoted for the shell.
inline std::string train_args(const std::vector<std::string>& overrides) {
  std::string args = "train --config " + quoted(kReverseConfig);
  for (const auto& o : overrides) args += " --set " + quoted(o);
  return args;
}

struct CliResult {
  int status = -1;  // exit status, -1 if the program did not exit normally
  std::string out, err;
};

// Runs the scratchformer executable with `args` (already quoted as needed) in one thread, stdin
// from `stdin_file` (/dev/null by default), capturing stdout and stderr in files in `tmp`.
inline CliResult run_cli(const std::string& args, const TempDir& tmp, const std::string& stdin_file = "/dev/null") {
  const std::string out = tmp / "cli.stdout", err = tmp / "cli.stderr";
  const std::string cmd = "SCRATCHFORMER_NUM_THREADS=1 " + quoted(SCRATCHFORMER_BINARY) + " " + args + " <" +
                          quoted(stdin_file) + " >" + quoted(out) + " 2>" + quoted(err);
  const int rc = std::system(cmd.c_str());
  CliResult r;
  r.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// Exit status 2 and exactly one line on stderr, "scratchformer: error: ...", containing each of
// `parts`.
inline void check_one_line_error(const CliResult& r, const std::vector<std::string>& parts) {
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.rfind("scratchformer: error: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK((!r.err.empty() && r.err.back() == '\n'));
  for (const auto& part : parts) CHECK_THAT(r.err, Catch::Contains(part));
}

}  // namespace sf::test
