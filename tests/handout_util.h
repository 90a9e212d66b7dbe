// Helpers for the tests of handouts and their grading (test_handout, test_handout_audit,
// test_grade_student): the fixture tree, reading and writing its files, and running the real
// binary. Needs SCRATCHFORMER_SOURCE_DIR, SCRATCHFORMER_TEST_DATA and SCRATCHFORMER_BINARY.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"
#include "train/classroom/shell.h"

namespace sf::test {

namespace fs = std::filesystem;

// A small tree with exercise and related regions (tests/data/handout/tree).
inline const fs::path kFixture = fs::path(SCRATCHFORMER_TEST_DATA) / "handout" / "tree";
inline const fs::path kSource = SCRATCHFORMER_SOURCE_DIR;
inline const fs::path kBinary = SCRATCHFORMER_BINARY;

inline std::string read(const fs::path& p) { return read_file(p.string()); }

// Writes `text` to `p`, creating its folders.
inline void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// 'path', for a shell command line (appended piecewise: GCC 12's -O3 warns, wrongly, on "'" + s).
inline std::string quoted(const fs::path& p) { return std::string(1, '\'').append(p.string()).append(1, '\''); }

// Runs a shell command; returns its exit status and fills `out` with its standard output.
inline int run(const std::string& command, std::string& out) {
  const train::CommandResult r = train::run_shell(command);
  out = r.output;
  return r.status;
}

}  // namespace sf::test
