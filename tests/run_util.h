// Helpers for the tests that run whole training jobs or the scratchformer program
// (test_kill_resume, test_bad_inputs, test_training, test_classroom, test_trace, test_graph_dot,
// test_distributed): small copies of the reverse task, the overrides that train on them in about
// a second, and running the real binary with its exit status and output captured. Needs
// SCRATCHFORMER_SOURCE_DIR and SCRATCHFORMER_BINARY. (Temporary folders and files:
// tests/test_util.h.)
#pragma once

#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace sf::test {

namespace fs = std::filesystem;

inline const std::string kSourceDir = SCRATCHFORMER_SOURCE_DIR;
inline const std::string kReverseConfig = kSourceDir + "/configs/reverse.toml";
inline const std::string kReverseData = kSourceDir + "/data/corpora/reverse/";

// The first `n` lines of a file, each ending in '\n'.
inline std::string first_lines(const std::string& path, int n) {
  std::ifstream in(path);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

// `s` quoted for /bin/sh: in single quotes, each ' inside written as '\''.
inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Copies the first `train_pairs` training and `valid_pairs` validation pairs of the reverse
// corpus into `tmp` (train.src, train.tgt, valid.src, valid.tgt), unless they are there already.
inline void copy_reverse_slice(const TempDir& tmp, int train_pairs, int valid_pairs) {
  if (fs::exists(tmp / "train.src")) return;
  tmp.write("train.src", first_lines(kReverseData + "train.src", train_pairs));
  tmp.write("train.tgt", first_lines(kReverseData + "train.tgt", train_pairs));
  tmp.write("valid.src", first_lines(kReverseData + "valid.src", valid_pairs));
  tmp.write("valid.tgt", first_lines(kReverseData + "valid.tgt", valid_pairs));
}

// The overrides that make configs/reverse.toml train on the slice copied into `tmp` by
// copy_reverse_slice, in `run_dir`: no test set, 256-token batches, D 32, F 64, one layer each.
inline std::vector<std::string> reverse_slice_overrides(const TempDir& tmp, const std::string& run_dir) {
  return {"run.dir=" + run_dir,
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
          "model.decoder_layers=1"};
}

// A small copy of the reverse corpus (300 training pairs, 16 validation pairs) in `tmp`, and the
// overrides that make configs/reverse.toml train on it quickly: D 32, one layer each,
// 256-token batches (11 per epoch), one thread, no test set. `extra` overrides come last.
inline std::vector<std::string> small_reverse_run(const TempDir& tmp, const std::string& run_dir,
                                                  const std::vector<std::string>& extra = {}) {
  copy_reverse_slice(tmp, 300, 16);
  std::vector<std::string> o = reverse_slice_overrides(tmp, run_dir);
  o.insert(o.end(), {"model.dropout=0.1", "run.threads=1", "train.log_every=5"});
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

// One training step of configs/reverse.toml on 120 training and 4 validation pairs copied into
// `tmp`: D 32, one layer each, 256-token batches, one thread, no test set (the --trace and
// --dump-graph tests look at that one step).
inline std::vector<std::string> one_step_reverse_run(const TempDir& tmp, const std::string& run_dir) {
  copy_reverse_slice(tmp, 120, 4);
  std::vector<std::string> o = reverse_slice_overrides(tmp, run_dir);
  o.insert(o.end(), {"run.threads=1", "train.max_steps=1"});
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

// The same for `args`, each quoted for the shell, stdin from /dev/null, the output captured in a
// temporary folder of its own.
inline CliResult run_cli(const std::vector<std::string>& args) {
  const TempDir io("sf_cli");
  std::string line;
  for (const std::string& a : args) line += (line.empty() ? "" : " ") + quoted(a);
  return run_cli(line, io);
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
