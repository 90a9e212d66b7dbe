// Handouts: a copy of the repository with the solutions of chosen exercises cut out, for
// `scratchformer handout` (train/cli/cmd_handout.cpp); docs/exercises.md is the guide.
//
// In the teacher's tree each solution is a region of a C++ source (autograd/exercise.h):
//
//     // EXERCISE(masks): what to implement        <- one or more `//` lines; they stay
//     // BEGIN SOLUTION
//     ...the solution...
//     // END SOLUTION
//
// Code elsewhere that would give a chosen exercise's answer away in another form (the fast twin
// of the kernel, a test that quotes the answer, a planted-bug mutant, a reference function) is
// a related region, hidden with the exercise (C++ `//` or Python `#` comments):
//
//     // BEGIN RELATED(layer_norm): the float32 twin of the exercise's kernels
//     ...code that stays in the teacher's tree...
//     // HANDOUT INSTEAD:                           <- optional: what the handout has in its place,
//     // bool layernorm_forward(...) { return false; }   as comment lines, uncommented there
//     // END RELATED
//
// For a chosen exercise the region becomes its INSTEAD lines without their comment marks (or
// nothing); otherwise the code stays and the marker and INSTEAD lines go. The handout audit
// (handout_audit.h) finds what a related region should hide.
//
// For a chosen exercise the lines from BEGIN to END (both included) become one line at BEGIN's
// indentation, `sf::exercise::not_implemented("masks", __func__, __FILE__);`. For the others the
// solution stays and only the two marker lines go. A region's exercise is the word of the nearest
// `// EXERCISE(word):` line above it in the same file. Markers are looked for in the C++ sources
// (.h .hpp .cpp .cc) outside tests/data/ (test fixtures live there); a marker must stand alone on
// its line. A malformed marker stops the handout with "file:line: what is wrong".
//
//   Handout h = make_handout("~/scratchformer", {"masks", "softmax"});  // reads, checks, transforms
//   write_handout(h, "~/scratchformer", "/tmp/class-1");               // all or nothing
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sf::train {

// One solution region of one file. Lines are 1-based.
struct SolutionRegion {
  std::string word;                   // the exercise (the EXERCISE line above it)
  int exercise_line = 0;              // that EXERCISE line
  int begin_line = 0;                 // the `// BEGIN SOLUTION` line
  int end_line = 0;                   // the `// END SOLUTION` line
  std::vector<std::string> solution;  // the lines strictly between the markers, as written
};

// The regions of one file's text, in order. `path` only names the file in errors. Throws
// std::invalid_argument "path:line: ..." on a malformed marker or an unknown exercise word.
std::vector<SolutionRegion> find_solution_regions(const std::string& path, const std::string& text);

// One related region of one file (lines 1-based): BEGIN RELATED, HANDOUT INSTEAD (0: none), END.
struct RelatedRegion {
  std::string word;
  int begin_line = 0, instead_line = 0, end_line = 0;
};
// The related regions of one file's text, in order; throws "path:line: ..." on a malformed
// marker (one left open, an END without BEGIN, an INSTEAD line that is not a comment, an
// unknown word).
std::vector<RelatedRegion> find_related_regions(const std::string& path, const std::string& text);
// The text with each related region resolved: hidden (its INSTEAD lines) for a chosen word, kept
// (its markers and INSTEAD lines dropped) for the others.
std::string resolve_related(const std::string& path, const std::string& text, const std::vector<std::string>& chosen);

// The function a region is in, from the file's lines and its EXERCISE line (1-based): the nearest
// line above that is indented less, back to the one with its "(", qualified by the struct it is
// in when it is a member ("MatMul::backward", "causal_mask"). The registry's Exercise::functions
// are these names.
std::string region_function(const std::vector<std::string>& lines, int exercise_line);

// The handout text of one file: chosen regions stubbed, the others' markers dropped. Appends the
// word of each stubbed region to `stubbed` when given. Throws like find_solution_regions.
std::string handout_text(const std::string& path, const std::string& text, const std::vector<std::string>& chosen,
                         std::vector<std::string>* stubbed = nullptr);

// A file's bytes; throws std::runtime_error "path: cannot read".
std::string read_text(const std::filesystem::path& path);

// True for the files whose markers count: C++ sources outside tests/data/ (related regions may
// also be in Python files, may_hold_related). `path` is relative
// to the source root, with '/' separators.
bool may_hold_regions(const std::string& path);
bool may_hold_related(const std::string& path);

// The files of the tree at `root`, relative, sorted: `git ls-files --cached --others
// --exclude-standard` when root has a .git (so no build outputs, runs or ignored files, but the
// teacher's new files), otherwise a walk that skips .git, build* and runs. Never anything in .git.
std::vector<std::string> source_files(const std::filesystem::path& root);

// Throws std::invalid_argument unless `root` holds a Scratchformer tree (its CMakeLists.txt
// declares project(scratchformer ...) and autograd/exercise.h exists).
void require_scratchformer_tree(const std::filesystem::path& root);

struct HandoutFile {
  std::string path;            // relative to the root
  bool changed = false;        // it held regions: `text` is its handout text
  std::string text;            // only when changed; unchanged files are copied as they are
  std::vector<std::string> stubbed;  // the word of each region stubbed in it
};

struct Handout {
  std::vector<std::string> words;  // the chosen exercises, in course order
  std::vector<HandoutFile> files;  // every file of the handout except its manifest files
  std::map<std::string, int> stubs;  // regions stubbed per chosen word
};

// The handout of the tree at `root` for `words` (each a registry word; empty = all). Every file
// that may hold regions is read and checked, so a malformed marker anywhere is an error, and so
// is a chosen word with no region in the tree.
Handout make_handout(const std::filesystem::path& root, const std::vector<std::string>& words);

// The manifest files written at the top of a handout.
inline constexpr const char* kHandoutManifest = "handout.json";  // {"scratchformer_handout":1,"exercises":[...]}
inline constexpr const char* kHandoutReadme = "HANDOUT.md";      // the student's instructions, English and Chinese

std::string handout_manifest_json(const Handout& h);
std::string handout_readme(const Handout& h);

// Writes the handout into `out_dir`, which must not exist or be empty and must lie outside
// `root`: first into a sibling out_dir.tmp-XXXXXX, renamed to out_dir at the end, so a failure
// leaves no half handout. Throws std::invalid_argument / std::runtime_error with one line.
void write_handout(const Handout& h, const std::filesystem::path& root, const std::filesystem::path& out_dir);

// The exercises a handout at `source_root` asks for: the words of its handout.json, or nullopt
// when there is none (the teacher's tree). Throws on an unreadable or malformed manifest.
std::optional<std::vector<std::string>> read_handout_manifest(const std::filesystem::path& source_root);

}  // namespace sf::train
