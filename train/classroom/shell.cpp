// Running a shell command (shell.h).
#include "train/classroom/shell.h"

#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace sf::train {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult run_shell(const std::string& command, Stderr err,
                        const std::function<void(const std::string& line)>& each_line) {
  const std::string full = err == Stderr::merged    ? "(" + command + ") 2>&1"
                           : err == Stderr::dropped ? "(" + command + ") 2>/dev/null"
                                                    : command;
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  CommandResult r;
  std::string line;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    r.output += static_cast<char>(c);
    if (!each_line) continue;
    if (c != '\n') line += static_cast<char>(c);
    else each_line(line), line.clear();
  }
  if (each_line && !line.empty()) each_line(line);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_build_error(const std::string& log) {
  const auto trimmed = [](const std::string& l) {
    const std::size_t a = l.find_first_not_of(" \t\r");
    return a == std::string::npos ? std::string() : l.substr(a, l.find_last_not_of(" \t\r") - a + 1);
  };
  std::string last;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) {
    if (l.find("error:") != std::string::npos || l.find("Error ") != std::string::npos) return trimmed(l);
    if (!trimmed(l).empty()) last = trimmed(l);
  }
  return last.empty() ? "the build failed" : last;
}

}  // namespace sf::train
