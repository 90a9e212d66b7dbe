// Runs survive interruption (train/checkpoint/checkpoint.h, train/trainer.h, the scratchformer binary):
//   run.keep_checkpoints keeps checkpoint-last and the K - 1 checkpoints before it, deleting
//   older ones only after the new one is in place, also across --resume;
//   SIGKILL at seeded random moments and right inside checkpoint writes: the run directory always
//   holds an intact checkpoint-last (checksum verified) or none, --resume (or a fresh start when
//   there is none) finishes with exit status 0, and the final weights are bit for bit those of an
//   uninterrupted run (one thread). (The same equality for a clean stop at a checkpoint through
//   train() in-process: test_training.cpp, "train 2N steps straight equals N steps then resume
//   for N more bit for bit".)
//   A write that fails (file size limit: EFBIG, as on a full disk) leaves the previous checkpoint
//   intact and is reported in one line; an unwritable run directory is reported before training.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "run_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/safetensors.h"

extern char** environ;

using namespace sf;
using namespace sf::test;
using Catch::Contains;
using Clock = std::chrono::steady_clock;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// ---- the run directory's files -------------------------------------------------------------

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::set<std::string> checkpoint_files(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& n : files_in(dir))
    if (n.rfind("checkpoint-", 0) == 0) names.insert(n);
  return names;
}

std::int64_t step_of(const std::string& path) { return train::load_checkpoint(path).state.step; }

// True when every tensor of the two checkpoints has the same bytes, and the training position
// (step, data position, RNG, Adam's t, tokens seen, best metric) is the same.
bool same_checkpoint(const std::string& a_path, const std::string& b_path) {
  const train::SafetensorsFile a = train::load_safetensors(a_path), b = train::load_safetensors(b_path);
  if (a.order != b.order) return false;
  for (const auto& name : a.order) {
    const Tensor& x = a.tensors.at(name);
    const Tensor& y = b.tensors.at(name);
    if (x.shape() != y.shape() || x.dtype() != y.dtype() ||
        std::memcmp(x.raw_data(), y.raw_data(), static_cast<std::size_t>(x.numel()) * dtype_size(x.dtype())) != 0)
      return false;
  }
  for (const char* key : {"step", "epoch", "batch_in_epoch", "optimizer_steps", "dropout_rng", "tokens_seen",
                          "best_metric", "has_best", train::kChecksumKey})
    if (a.metadata.at(key) != b.metadata.at(key)) return false;
  return true;
}

// ---- running the binary as a child process we can kill --------------------------------------

// Starts `scratchformer train` with the overrides (and --resume), one thread, stdin /dev/null,
// stdout and stderr to `log`.
pid_t start_training(const std::vector<std::string>& overrides, bool resume, const std::string& log) {
  std::vector<std::string> args = {SCRATCHFORMER_BINARY, "train", "--config", kReverseConfig};
  for (const auto& o : overrides) args.insert(args.end(), {"--set", o});
  if (resume) args.push_back("--resume");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = {"SCRATCHFORMER_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "SCRATCHFORMER_NUM_THREADS=", 26) != 0) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  REQUIRE(rc == 0);
  return pid;
}

// The exit status of a finished child, or -1 if it did not exit normally (killed).
int exit_status(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

// Waits for the child; returns its exit status (-1 when killed by a signal).
int wait_for(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return exit_status(status);
}

// Runs training to its end; returns the exit status.
int run_training(const std::vector<std::string>& overrides, bool resume, const std::string& log) {
  return wait_for(start_training(overrides, resume, log));
}

// How a kill went: whether the child was still running, and whether a checkpoint's temporary file
// was left behind (the kill landed inside a checkpoint write).
struct Kill {
  bool killed = false;          // false: the run had already finished
  bool during_write = false;    // a *.safetensors.tmp was left in the run directory
};

bool temporary_left(const std::string& run_dir) {
  for (const auto& n : files_in(run_dir))
    if (n.size() > 16 && n.compare(n.size() - 16, 16, ".safetensors.tmp") == 0) return true;
  return false;
}

// SIGKILL the child `delay` after it started (if it is still running), then reap it.
Kill kill_after(pid_t pid, Clock::duration delay, const std::string& run_dir) {
  const auto deadline = Clock::now() + delay;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return {};
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  kill(pid, SIGKILL);
  wait_for(pid);
  return {true, temporary_left(run_dir)};
}

// SIGKILL the child the moment it creates `tmp_name` in `run_dir` for the `nth` time (inotify
// wakes us when the file is created: the write, fsync and rename are still to come).
Kill kill_when_created(pid_t pid, int inotify_fd, const std::string& tmp_name, int nth, const std::string& run_dir) {
  int seen = 0, status = 0;
  alignas(inotify_event) char buf[4096];
  while (true) {
    if (waitpid(pid, &status, WNOHANG) == pid) return {};
    pollfd p{inotify_fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = read(inotify_fd, buf, sizeof buf);
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && tmp_name == ev->name && ++seen == nth) {
        kill(pid, SIGKILL);
        wait_for(pid);
        return {true, temporary_left(run_dir)};
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

}  // namespace

// ---- keeping the last K checkpoints ---------------------------------------------------------

TEST_CASE("keep_checkpoints keeps checkpoint-last and the K-1 before it also across a resume",
          "[reliability][checkpoint]") {
  // valid_every 2, so checkpoint-last is saved at steps 2, 4, 6, 8, 10 (then 12, 14 resumed).
  TempDir tmp;
  const std::string run = tmp / "run";
  auto overrides = [&](std::int64_t max_steps, std::int64_t keep) {
    return small_reverse_run(tmp, run, {"model.dropout=0", "train.valid_every=2", "train.max_steps=" + std::to_string(max_steps),
                                        "run.keep_checkpoints=" + std::to_string(keep)});
  };
  REQUIRE(run_training(overrides(10, 3), false, tmp / "a.log") == 0);
  const std::string last = run + "/" + train::kLastCheckpointName;
  CHECK(checkpoint_files(run) == std::set<std::string>{"checkpoint-best.safetensors", "checkpoint-last.safetensors",
                                                         "checkpoint-step-000006.safetensors",
                                                         "checkpoint-step-000008.safetensors"});
  CHECK(step_of(last) == 10);
  CHECK(step_of(run + "/checkpoint-step-000008.safetensors") == 8);
  CHECK(step_of(run + "/checkpoint-step-000006.safetensors") == 6);
  // a kept checkpoint is the earlier checkpoint-last itself: loading it and training on reaches
  // the same weights (checked through the listing: newest first)
  const auto listed = train::list_step_checkpoints(run);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].first == 8);
  CHECK(listed[1].first == 6);

  // resumed with K = 3: the checkpoint-last at 10 is kept when 12 is saved, 6 and 8 go in turn
  REQUIRE(run_training(overrides(14, 3), true, tmp / "b.log") == 0);
  CHECK(checkpoint_files(run) == std::set<std::string>{"checkpoint-best.safetensors", "checkpoint-last.safetensors",
                                                         "checkpoint-step-000010.safetensors",
                                                         "checkpoint-step-000012.safetensors"});
  CHECK(step_of(last) == 14);
  CHECK(step_of(run + "/checkpoint-step-000012.safetensors") == 12);
  CHECK(step_of(run + "/checkpoint-step-000010.safetensors") == 10);

  // resumed with K = 1: only checkpoint-last is left
  REQUIRE(run_training(overrides(16, 1), true, tmp / "c.log") == 0);
  CHECK(checkpoint_files(run) == std::set<std::string>{"checkpoint-best.safetensors", "checkpoint-last.safetensors"});
  CHECK(step_of(last) == 16);
}

TEST_CASE("keep_checkpoints deletes nothing when the new checkpoint-last cannot be written",
          "[reliability][checkpoint][errors]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  const auto overrides = small_reverse_run(tmp, run, {"model.dropout=0", "train.valid_every=2", "train.max_steps=6",
                                                      "run.keep_checkpoints=2"});
  REQUIRE(run_training(overrides, false, tmp / "a.log") == 0);
  REQUIRE(checkpoint_files(run).count("checkpoint-step-000004.safetensors") == 1);
  const std::string last = run + "/" + train::kLastCheckpointName;
  const std::string last_bytes = read_file(last), step4_bytes = read_file(run + "/checkpoint-step-000004.safetensors");

  // the resumed run's first save (step 8) cannot create its temporary file
  fs::create_directory(last + ".tmp");  // blocks PATH.tmp, even for root
  auto more = overrides;
  more.push_back("train.max_steps=10");
  const CliResult r = run_cli(train_args(more) + " --resume", tmp);
  check_one_line_error(r, {last, "cannot create"});
  // checkpoint-last (step 6) is kept as step 6 before the write; nothing older was deleted
  CHECK(read_file(last) == last_bytes);
  CHECK(step_of(last) == 6);
  CHECK(read_file(run + "/checkpoint-step-000004.safetensors") == step4_bytes);
  CHECK(checkpoint_files(run).count("checkpoint-step-000006.safetensors") == 1);
}

// ---- SIGKILL at random moments and inside checkpoint writes ---------------------------------

TEST_CASE("SIGKILL at random moments and during checkpoint writes never loses the run and resumes bit for bit",
          "[reliability][kill]") {
  // 60 steps, checkpoint-last and checkpoint-best (by validation loss, which keeps improving)
  // every 3 steps, the 3 most recent checkpoints kept.
  constexpr std::int64_t kSteps = 60;
  // SIGKILL at seeded random moments of the run: 8, or 3 under AddressSanitizer (whose runs are
  // about ten times slower; there the point is memory errors, not more trials)
  constexpr int kRandomTrials = kSanitized ? 3 : 8;
  constexpr double kLatestKill = 0.9;  // of the uninterrupted run's duration (a run may be faster)
  constexpr std::uint32_t kSeed = 20261129;
  TempDir tmp;
  auto overrides = [&](const std::string& run) {
    return small_reverse_run(tmp, run, {"train.valid_every=3", "train.max_steps=" + std::to_string(kSteps),
                                        "train.best_metric=loss", "run.keep_checkpoints=3"});
  };

  // the uninterrupted run: the weights every interrupted one must end with, and its duration
  const std::string reference = tmp / "reference";
  const auto t0 = Clock::now();
  REQUIRE(run_training(overrides(reference), false, tmp / "reference.log") == 0);
  const auto duration = Clock::now() - t0;
  const std::string reference_last = reference + "/" + train::kLastCheckpointName;
  REQUIRE(step_of(reference_last) == kSteps);

  // The trials: kRandomTrials random moments in [0, kLatestKill * duration), then the moment a
  // checkpoint's temporary file appears: the 2nd and the 13th checkpoint-last, the 3rd and the 9th
  // checkpoint-best (under AddressSanitizer the 2nd checkpoint-last and the 3rd checkpoint-best).
  struct Trial {
    std::string what;
    Clock::duration delay{};
    std::string tmp_name;  // when set: kill when this file is created for the nth time
    int nth = 0;
  };
  std::vector<Trial> trials;
  std::mt19937 rng(kSeed);
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  for (int i = 0; i < kRandomTrials; ++i) {
    const auto delay = std::chrono::duration_cast<Clock::duration>(duration * (kLatestKill * fraction(rng)));
    trials.push_back({"random moment " + std::to_string(std::chrono::duration<double>(delay).count()) + " s", delay, "", 0});
  }
  trials.push_back({"writing checkpoint-last #2", {}, "checkpoint-last.safetensors.tmp", 2});
  trials.push_back({"writing checkpoint-best #3", {}, "checkpoint-best.safetensors.tmp", 3});
  if (!kSanitized) {
    trials.push_back({"writing checkpoint-last #13", {}, "checkpoint-last.safetensors.tmp", 13});
    trials.push_back({"writing checkpoint-best #9", {}, "checkpoint-best.safetensors.tmp", 9});
  }

  int random_killed = 0, random_in_write = 0, write_killed = 0, write_in_write = 0, resumed = 0, fresh = 0;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const Trial& trial = trials[i];
    INFO("trial " << i << ": SIGKILL at " << trial.what);
    const std::string run = tmp / ("run" + std::to_string(i));
    fs::create_directories(run);  // before the start, so inotify can watch it
    Kill k;
    if (trial.tmp_name.empty()) {
      k = kill_after(start_training(overrides(run), false, tmp / "killed.log"), trial.delay, run);
    } else {
      const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      REQUIRE(fd >= 0);
      REQUIRE(inotify_add_watch(fd, run.c_str(), IN_CREATE) >= 0);
      k = kill_when_created(start_training(overrides(run), false, tmp / "killed.log"), fd, trial.tmp_name, trial.nth, run);
      close(fd);
      CHECK(k.killed);
    }
    (trial.tmp_name.empty() ? random_killed : write_killed) += k.killed;
    (trial.tmp_name.empty() ? random_in_write : write_in_write) += k.during_write;

    // What is left is intact: every checkpoint loads and its checksum matches.
    const std::string last = run + "/" + train::kLastCheckpointName;
    for (const auto& name : checkpoint_files(run)) {
      if (name.find(".tmp") != std::string::npos) continue;
      INFO("checking " << name);
      CHECK_NOTHROW(train::load_checkpoint(run + "/" + name));
    }
    // Resume from it, or start afresh when there is none; either way the run ends as the
    // uninterrupted one did.
    const bool has_last = fs::exists(last);
    has_last ? ++resumed : ++fresh;
    const int status = run_training(overrides(run), has_last, tmp / "resumed.log");
    INFO((has_last ? "--resume" : "fresh start") << " log:\n" << read_file(tmp / "resumed.log"));
    REQUIRE(status == 0);
    CHECK(step_of(last) == kSteps);
    CHECK(same_checkpoint(reference_last, last));
    CHECK_FALSE(temporary_left(run));  // the resumed run rewrote any half-written checkpoint
  }
  WARN("kill test: " << trials.size() << " trials; random moments: " << random_killed << " of " << kRandomTrials
                     << " killed while running, " << random_in_write << " of them inside a checkpoint write; "
                     << "at a checkpoint's creation: " << write_killed << " of " << trials.size() - kRandomTrials
                     << " killed, " << write_in_write << " inside the write (temporary file left); then " << resumed
                     << " resumed, " << fresh << " started afresh, all ending bit for bit as the uninterrupted run ("
                     << std::chrono::duration<double>(duration).count() << " s)");
  CHECK(random_killed >= kRandomTrials / 2);  // a slow machine may make a run finish early; most must not
  CHECK(write_in_write >= 1);
}

// ---- a failing write and an unwritable run directory ----------------------------------------

namespace {

// Runs the binary with `args` in a child whose file size limit is `max_file_bytes` (RLIMIT_FSIZE:
// a write past it fails with EFBIG, for root too, the way a full disk fails with ENOSPC) and
// SIGXFSZ ignored (so the write returns the error instead of killing the process). stdout and
// stderr come back through pipes, which the limit does not apply to.
CliResult run_with_file_size_limit(const std::string& args, rlim_t max_file_bytes) {
  const std::string cmd = "SCRATCHFORMER_NUM_THREADS=1 exec " + quoted(SCRATCHFORMER_BINARY) + " " + args + " </dev/null";
  int out_pipe[2], err_pipe[2];
  REQUIRE(pipe(out_pipe) == 0);
  REQUIRE(pipe(err_pipe) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]), close(out_pipe[1]), close(err_pipe[0]), close(err_pipe[1]);
    signal(SIGXFSZ, SIG_IGN);  // kept across exec
    const rlimit limit{max_file_bytes, max_file_bytes};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(100);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(101);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  CliResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  for (int open_pipes = 2; open_pipes > 0;) {
    REQUIRE(poll(fds, 2, -1) > 0);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores it from now on
        --open_pipes;
      }
    }
  }
  r.status = wait_for(pid);
  return r;
}

}  // namespace

TEST_CASE("a checkpoint write that fails like a full disk keeps the previous checkpoint and says so",
          "[reliability][errors]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  const auto overrides = small_reverse_run(tmp, run, {"model.dropout=0", "train.valid_every=2", "train.max_steps=4"});
  REQUIRE(run_training(overrides, false, tmp / "a.log") == 0);
  const std::string last = run + "/" + train::kLastCheckpointName;
  const std::string before = read_file(last);
  REQUIRE(before.size() > 100000);  // so a 64 kB limit stops the checkpoint, not the small files

  // Resumed under a 64 kB file size limit: config.toml and metrics.tsv fit, the checkpoint does not.
  constexpr rlim_t kLimit = 64 * 1024;
  auto more = overrides;
  more.push_back("train.max_steps=8");
  const CliResult r = run_with_file_size_limit(train_args(more) + " --resume", kLimit);
  INFO("stdout: " << r.out);
  check_one_line_error(r, {last, "cannot write", "File too large"});
  CHECK(read_file(last) == before);  // the previous checkpoint-last, byte for byte
  CHECK(step_of(last) == 4);
  CHECK_FALSE(fs::exists(last + ".tmp"));  // the half-written temporary is removed

  // and with the limit gone the run resumes from it and finishes
  CHECK(run_training(more, true, tmp / "b.log") == 0);
  CHECK(step_of(last) == 8);
}

TEST_CASE("an unwritable run directory is reported before training starts", "[reliability][errors]") {
  TempDir tmp;
  SECTION("no file can be written (file size limit 0, like a full disk)") {
    const std::string run = tmp / "run";
    const CliResult r = run_with_file_size_limit(train_args(small_reverse_run(tmp, run)), 0);
    check_one_line_error(r, {"run.dir " + run, "not writable"});
    CHECK_FALSE(fs::exists(run + "/spm.model"));  // nothing was started
    CHECK(r.out.empty());
  }
  SECTION("run.dir is a file") {
    const std::string run = tmp.write("run", "a file, not a folder\n");
    const CliResult r = run_cli(train_args(small_reverse_run(tmp, run)), tmp);
    check_one_line_error(r, {"run.dir " + run});
    CHECK(read_file(run) == "a file, not a folder\n");
  }
  SECTION("run.dir lies below a file") {
    tmp.write("file", "x");
    const std::string run = tmp / "file/run";
    const CliResult r = run_cli(train_args(small_reverse_run(tmp, run)), tmp);
    check_one_line_error(r, {"run.dir " + run, "cannot create it"});
  }
}
