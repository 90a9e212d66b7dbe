// `scratchformer serve [--runs DIR] [--checkpoint FILE] [--configs DIR] [--host H] [--port N]`:
// the explorer in the browser (train/explorer/server.h, docs/explorer.md). Prints the URL, then
// answers until Ctrl-C or SIGTERM, and exits 0.
//
// Stopping: the signal handler only writes one byte to a pipe (the self-pipe trick: write() is
// async-signal-safe, stopping an HTTP server is not). A thread waiting on the other end of the
// pipe calls Server::stop(). Blocking the signals and waiting with sigwait() would not work:
// the OpenMP threads of the model code do not block them, so the signal could land on one.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/data_folder.h"
#include "train/explorer/api.h"
#include "train/explorer/server.h"

namespace sf::cli {

namespace {

struct ServeArgs {
  std::string runs = "runs";
  std::string checkpoint;
  std::string configs;  // empty: ./configs, else the data folder's (train/data_folder.h)
  std::string host = "127.0.0.1";
  int port = 8080;
};

int g_stop_pipe[2] = {-1, -1};  // [0] read by the stopping thread, [1] written by the handler

extern "C" void on_stop_signal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

// SIGINT and SIGTERM write to the pipe from now on.
void install_stop_signals() {
  if (pipe(g_stop_pipe) != 0) throw std::runtime_error("serve: cannot make the pipe for Ctrl-C");
  fcntl(g_stop_pipe[1], F_SETFL, O_NONBLOCK);  // a second Ctrl-C never blocks the handler
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a browser closing a connection mid-answer is not an error
}

// Waits for one byte on the pipe, then stops the server (run() returns in the main thread).
void stop_on_signal(explorer::Server& server) {
  char byte = 0;
  while (read(g_stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  server.stop();
}

void print_banner(const ServeArgs& a, int port) {
  const std::string url = explorer::server_url(a.host, port);
  std::cout << "Scratchformer explorer: " << url << "  (Ctrl-C stops it)\n"
            << "Scratchformer 可视化浏览器：" << url << "（按 Ctrl-C 停止）\n";
  if (!explorer::is_loopback_host(a.host))
    std::cout << "warning: --host " << a.host << " lets other machines connect to this explorer (no password)\n"
              << "警告：--host " << a.host << " 允许其他机器连接这个浏览器（没有密码）\n";
  std::cout.flush();
}

// --runs: a folder. Given on the command line it must exist (a typo would show an empty list);
// the default "runs" may not exist yet before the first training, which a note says.
void check_runs_folder(const ServeArgs& a, bool given) {
  std::error_code ec;
  const auto status = std::filesystem::status(a.runs, ec);
  if (std::filesystem::is_directory(status)) return;
  if (std::filesystem::exists(status))
    throw std::invalid_argument("serve --runs: expected a folder of runs, got a file: " + a.runs);
  if (given) throw std::invalid_argument("serve --runs: no such folder: " + a.runs);
  std::cout << "note: no runs folder '" << a.runs << "' yet: runs appear here once `scratchformer train` writes one\n"
            << "提示：还没有 runs 文件夹 '" << a.runs << "'：用 `scratchformer train` 训练后，运行会出现在这里\n";
}

int run_serve(ServeArgs a, bool runs_given) {
  check_runs_folder(a, runs_given);
  if (a.configs.empty()) {
    const std::optional<train::DataFolder> data = train::find_data_folder();
    a.configs = std::filesystem::is_directory("configs") || !data ? "configs" : data->configs().string();
  }
  explorer::Explorer explorer({a.runs, a.configs, a.checkpoint});
  explorer.preload_default_model();  // a bad --checkpoint is reported now, not on the first page
  explorer::Server server(explorer, {a.host, a.port});
  const int port = server.bind();
  install_stop_signals();
  print_banner(a, port);
  std::thread stopper(stop_on_signal, std::ref(server));
  const bool ok = server.run();
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &byte, 1);  // the stopper ends too
  stopper.join();
  std::cout << "Scratchformer explorer stopped. / 已停止。\n";
  return ok ? 0 : 1;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "The explorer in the browser: runs, translations, attention, one step");
  CLI::Option* runs = cmd->add_option("--runs", a->runs, "Folder of runs (each folder in it with a config.toml) (default: runs)");
  cmd->add_option("--checkpoint", a->checkpoint, "One more model to use, outside the runs folder");
  cmd->add_option("--configs", a->configs, "Folder of configs the Inside-one-step page may use (default: ./configs, else the installed configs)");
  cmd->add_option("--host", a->host, "Address to listen on (default: 127.0.0.1, this machine only)");
  cmd->add_option("--port", a->port, "Port (default: 8080; 0 picks a free one and prints it)")
      ->check(whole_number_in(0, 65535, "a port in [0, 65535]"));
  return {cmd, [a, runs] { return run_serve(*a, runs->count() > 0); }};
}

}  // namespace sf::cli
