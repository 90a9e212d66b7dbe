// The handout audit: does a handout give an exercise's answer away in another place?
//
// Cutting a solution region removes the answer's lines from where they were written, but the same
// lines may live elsewhere: a twin of the op (RMSNorm beside LayerNorm), a test that quotes the
// answer, a planted-bug mutant, a reference script. The audit takes every line of the chosen
// exercises' solutions, normalises it (comments dropped, tokens joined by one space, so spacing and
// line comments do not hide a copy) and looks for it in every text file the handout ships.
//
//   const Handout h = make_handout(root, {"softmax"});
//   for (const AuditMatch& m : audit_handout(h, root)) ...   // m.found_at holds a copy of m.line
//
// Lines too short to give anything away (braces, a bare loop header, fewer than kMinAuditTokens
// tokens) are not searched. A match the teacher has looked at and found harmless is declared in
// train/classroom/audit_harmless.tsv (word, the normalised line, why it gives nothing away); code
// that does give an answer away is a related region, hidden with its exercise (handout.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "train/classroom/handout.h"

namespace sf::train {

inline constexpr std::size_t kMinAuditTokens = 6;
inline constexpr const char* kAuditHarmless = "train/classroom/audit_harmless.tsv";  // from the source root

// "if (x < 0) y = 1;  // note" -> "if ( x < 0 ) y = 1 ;": identifiers, numbers and single
// punctuation marks joined by one space; a // comment, or a whole # or * comment line, dropped.
std::string normalise_code_line(const std::string& line);

// Whether a normalised solution line could give its answer away: at least kMinAuditTokens tokens,
// and not only braces and a loop header ("for ( std :: int64_t n = 0 ; n < N ; ++ n ) {").
bool worth_auditing(const std::string& normalised);

struct AuditMatch {
  std::string word;         // the exercise whose solution line it is
  std::string solution_at;  // "path:line" of the line in the teacher's region
  std::string found_at;     // "path:line" in the handout
  std::string line;         // the normalised line
  std::string harmless;     // why it gives nothing away (audit_harmless.tsv), or "" when undeclared
};

// One declaration of audit_harmless.tsv.
struct HarmlessLine {
  std::string word, line, reason;
};
// Reads `path` (word or * for any, TAB normalised line TAB reason; # comments and blank lines
// skipped). Throws
// std::invalid_argument "path:line: ..." on a line without three fields or with an unknown word.
std::vector<HarmlessLine> read_harmless(const std::filesystem::path& path);

// Every place the handout `h` of the tree at `root` holds a searched solution line of one of its
// exercises, in file order. Binary files and files over 2 MB are skipped.
std::vector<AuditMatch> audit_handout(const Handout& h, const std::filesystem::path& root,
                                      const std::vector<HarmlessLine>& harmless);

}  // namespace sf::train
