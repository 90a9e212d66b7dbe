// Data-parallel training with MPI (train/distributed/distributed.h, train/trainer.cpp), run through mpirun:
//   - 2 ranks give the same parameters as 1 process on the same global batches: bit for bit in
//     float64 with the rank-order reduction (tests/mpi/distributed_worker.cpp exact64), and
//     within float32 reduction-order rounding through `scratchformer train` (plain MPI_Allreduce)
//   - a rank that dies (SIGKILL) or throws ends the whole job with a non-zero status and a
//     message, within seconds, instead of leaving the others waiting forever
//   - a checkpoint written by a 2-rank run resumes in a 1-rank run and vice versa, and both end
//     where an uninterrupted 1-process run ends
// Every test is skipped (with a message) when mpirun is not installed. Each mpirun call runs
// under `timeout`, so a hang fails the test instead of stalling CTest.
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "run_util.h"
#include "train/checkpoint/safetensors.h"

using Catch::Contains;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kMpirun = SCRATCHFORMER_MPIEXEC;
const std::string kWorker = SCRATCHFORMER_DISTRIBUTED_WORKER;
const std::string kBinary = SCRATCHFORMER_BINARY;
const std::string kSourceDir = SCRATCHFORMER_SOURCE_DIR;
constexpr int kTimeoutSeconds = 60;  // a job that takes this long is hanging (they take a few seconds)
// A dead or failing rank must end the job quickly: mpirun notices a dead process at once and
// MPI_Abort kills the rest; a few seconds on a loaded 2-core machine, never the timeout.
constexpr double kAbortWithinSeconds = 20;

bool have_mpirun() {
  if (kMpirun.empty() || !fs::exists(kMpirun)) {
    WARN("skipped: mpirun not found (install OpenMPI: tools/install-deps.sh)");
    return false;
  }
  return true;
}

// tests/test_util.h and tests/run_util.h
using sf::test::copy_reverse_slice;
using sf::test::quoted;
using sf::test::read_file;
using sf::test::TempDir;

struct RunResult {
  int status = -1;  // exit status; -1 if it did not exit normally
  double seconds = 0;
  std::string out, err;
};

// Runs `command` through the shell with a timeout, stdout and stderr captured in `tmp`.
// Leak checking is off for MPI jobs: OpenMPI keeps allocations until exit, which LSan (in the
// asan preset) would report as leaks of our program.
RunResult run(const std::string& command, const TempDir& tmp) {
  const std::string out = tmp / "job.stdout", err = tmp / "job.stderr";
  const std::string cmd = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 "
                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout " + std::to_string(kTimeoutSeconds) + " " +
                          command + " </dev/null >" + quoted(out) + " 2>" + quoted(err);
  const auto t0 = Clock::now();
  const int rc = std::system(cmd.c_str());
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

std::string mpirun(int ranks) { return quoted(kMpirun) + " --oversubscribe -np " + std::to_string(ranks) + " "; }

// ---- scratchformer train on a tiny reverse task ---------------------------------------------

// `train --config configs/reverse.toml` with overrides for a run of a few seconds: 300 training
// pairs, 256-token batches (11 per epoch, about 25 pairs each), D 32, one layer each side, no
// dropout (so 1 and 2 ranks compute the same function), one thread per process. SGD with
// momentum and no clipping: Adam divides by sqrt(v), which turns float32 rounding in a gradient
// near zero into a full-size step, and clipping would hide a wrongly scaled gradient.
std::string train_args(const TempDir& tmp, const std::string& run_dir, std::int64_t steps, const std::string& extra = "") {
  copy_reverse_slice(tmp, 300, 8);
  std::string a = quoted(kBinary) + " train --config " + quoted(kSourceDir + "/configs/reverse.toml");
  for (const std::string& s : {"run.dir=" + run_dir, "data.train_src=" + tmp / "train.src", "data.train_tgt=" + tmp / "train.tgt",
                               "data.valid_src=" + tmp / "valid.src", "data.valid_tgt=" + tmp / "valid.tgt",
                               std::string("data.test_src=\"\""), std::string("data.test_tgt=\"\""),
                               std::string("data.batch_tokens=256"), std::string("model.d_model=32"),
                               std::string("model.d_ff=64"), std::string("model.encoder_layers=1"),
                               std::string("model.decoder_layers=1"), std::string("model.dropout=0"),
                               std::string("model.attention_dropout=0"), std::string("run.threads=1"),
                               std::string("train.optimizer=sgd"), std::string("train.momentum=0.9"),
                               std::string("train.lr=0.1"), std::string("train.schedule=constant"),
                               std::string("train.warmup_steps=0"), std::string("train.clip_norm=0"),
                               std::string("train.log_every=1"), "train.valid_every=" + std::to_string(steps),
                               "train.max_steps=" + std::to_string(steps)})
    a += " --set " + quoted(s);
  return a + " " + extra;
}

// Float32 parameters after a few SGD steps, 1 process against 2: the gradients differ only in
// the order their float32 terms were added (two shards, other matrix shapes for BLAS, then the
// allreduce), about 1e-6 relative, times lr 0.1 and six steps of momentum: far below 1e-5. A
// wrong normalisation (e.g. dividing by the shard's tokens instead of the global count) moves
// parameters by about lr x gradient, 1e-3 and more; the test checks the steps do move them that much.
using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h

// The largest absolute difference of any tensor in two checkpoints (same names required).
double max_difference(const std::string& a_path, const std::string& b_path) {
  const sf::train::SafetensorsFile a = sf::train::load_safetensors(a_path);
  const sf::train::SafetensorsFile b = sf::train::load_safetensors(b_path);
  REQUIRE(a.order == b.order);
  double worst = 0;
  for (const auto& name : a.order) {
    const auto& ta = a.tensors.at(name);
    const auto& tb = b.tensors.at(name);
    REQUIRE(ta.shape() == tb.shape());
    if (!sf::is_floating(ta.dtype())) continue;
    const auto va = ta.to(sf::Dtype::Float64).to_vector<double>(), vb = tb.to(sf::Dtype::Float64).to_vector<double>();
    for (std::size_t k = 0; k < va.size(); ++k) worst = std::max(worst, std::abs(va[k] - vb[k]));
  }
  return worst;
}

// Training-state metadata that must match exactly whatever the number of ranks.
void require_same_state(const std::string& a_path, const std::string& b_path) {
  const auto a = sf::train::load_safetensors(a_path).metadata, b = sf::train::load_safetensors(b_path).metadata;
  for (const char* key : {"step", "epoch", "batch_in_epoch", "optimizer_steps", "tokens_seen"}) {
    INFO("metadata " << key);
    REQUIRE(a.count(key) == 1);
    REQUIRE(b.count(key) == 1);
    CHECK(a.at(key) == b.at(key));
  }
}

const std::string kLast = "/checkpoint-last.safetensors";

}  // namespace

TEST_CASE("2 ranks equal 1 process bit for bit in float64 with the rank-order reduction", "[mpi][distributed]") {
  if (!have_mpirun()) return;
  TempDir tmp;
  const RunResult r = run(mpirun(2) + quoted(kWorker) + " exact64", tmp);
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("2 ranks") && Contains(" 0 of "));
}

TEST_CASE("a rank killed mid-training ends the whole job with an error instead of a hang", "[mpi][distributed]") {
  if (!have_mpirun()) return;
  TempDir tmp;
  const RunResult r = run(mpirun(2) + quoted(kWorker) + " die", tmp);
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // timeout's status: the job hung
  CHECK(r.seconds < kAbortWithinSeconds);
  CHECK_THAT(r.out, !Contains("finished 200 allreduces"));
}

TEST_CASE("an exception on one rank aborts every rank with its message and status", "[mpi][distributed]") {
  if (!have_mpirun()) return;
  TempDir tmp;
  const RunResult r = run(mpirun(2) + quoted(kWorker) + " throw", tmp);
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(r.seconds < kAbortWithinSeconds);
  CHECK_THAT(r.err, Contains("error on rank 1: rank 1 could not read its corpus"));
}

TEST_CASE("scratchformer train with a failing rank exits with the rank's error", "[mpi][distributed][training]") {
  // MPMD launch: rank 0 gets a good config, rank 1 a training corpus that does not exist. Rank 1
  // fails after the tokenizer barrier; rank 0 is already training and waits in its first
  // allreduce, until rank 1's MPI_Abort ends it.
  if (!have_mpirun()) return;
  TempDir tmp;
  const std::string good = train_args(tmp, tmp / "run", 4);
  const std::string bad = train_args(tmp, tmp / "run", 4, "--set " + quoted("data.train_src=" + tmp / "missing.src"));
  const RunResult r = run(quoted(kMpirun) + " --oversubscribe -np 1 " + good + " : -np 1 " + bad, tmp);
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(r.seconds < kAbortWithinSeconds + 10);  // + the tokenizer training before the failure
  CHECK_THAT(r.err, Contains("error on rank 1 of 2") && Contains("missing.src"));
}

TEST_CASE("2-rank training equals 1-process training and checkpoints resume across rank counts",
          "[mpi][distributed][training][checkpoint]") {
  // straight: 1 process, 2N steps. two: 2 ranks, 2N steps. a: 2 ranks N steps, then 1 process
  // resumes to 2N. b: 1 process N steps, then 2 ranks resume to 2N. All four end at the same
  // parameters (kFloat32Tol) and the same training state.
  if (!have_mpirun()) return;
  constexpr std::int64_t N = 3;
  TempDir tmp;
  const std::string straight = tmp / "straight", two = tmp / "two", a = tmp / "a", b = tmp / "b";
  auto ok = [&](const std::string& command) {
    const RunResult r = run(command, tmp);
    INFO(command << "\n" << r.out << r.err);
    REQUIRE(r.status == 0);
    return r;
  };
  ok(train_args(tmp, straight, 2 * N));
  const RunResult two_ranks = ok(mpirun(2) + train_args(tmp, two, 2 * N));
  ok(mpirun(2) + train_args(tmp, a, N));
  fs::copy_file(a + kLast, tmp / "half.safetensors");
  ok(train_args(tmp, a, 2 * N, "--resume"));
  ok(train_args(tmp, b, N));
  ok(mpirun(2) + train_args(tmp, b, 2 * N, "--resume"));

  // what is reported: the ranks, the global tokens/s and the allreduce share (log and metrics)
  CHECK_THAT(two_ranks.out, Contains("data-parallel: 2 processes") && Contains("2 ranks, allreduce"));
  const std::string metrics = read_file(two + "/metrics.tsv");
  CHECK_THAT(metrics, Contains("\tallreduce_share\taccuracy\n"));
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 1 + 2 * N + 1);  // header, train rows, one valid row

  const double moved = max_difference(tmp / "half.safetensors", straight + kLast);
  INFO("the last N steps moved a parameter by up to " << moved);
  REQUIRE(moved > 100 * kFloat32Tol);
  for (const std::string& run_dir : {two, a, b}) {
    INFO(run_dir);
    CHECK(max_difference(straight + kLast, run_dir + kLast) < kFloat32Tol);
    require_same_state(straight + kLast, run_dir + kLast);
  }
}
