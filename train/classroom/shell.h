// Running a shell command from the classroom tools (handout's `git ls-files`, grade's test
// programs and builds, the graph dump's Graphviz): one quoting rule and one way to run, so each
// caller says only what it runs.
//
//   const CommandResult r = run_shell("git -C " + shell_quote(root) + " ls-files", Stderr::merged);
//   if (r.status != 0) ...;
#pragma once

#include <functional>
#include <string>

namespace sf::train {

// `s` in single quotes, safe as one word for /bin/sh whatever it holds.
std::string shell_quote(const std::string& s);

struct CommandResult {
  std::string output;  // what the command printed (its standard output; stderr too when merged)
  int status = -1;     // its exit status; -1 when it did not exit normally (a signal)
};

enum class Stderr { merged, dropped, passed };  // into output, to /dev/null, or to our stderr

// Runs `command` with /bin/sh and collects its output. `each_line`, when given, also receives each
// line as it arrives (a long build's progress).
CommandResult run_shell(const std::string& command, Stderr err = Stderr::passed,
                        const std::function<void(const std::string& line)>& each_line = {});

// The first line of a build's log that names an error ("error:", make's "Error N"), trimmed; else
// its last line.
std::string first_build_error(const std::string& log);

}  // namespace sf::train
