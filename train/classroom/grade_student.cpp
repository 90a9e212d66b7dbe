// Grading on the teacher's side (grade_student.h).
#include "train/classroom/grade_student.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "train/classroom/exercises.h"
#include "train/classroom/handout.h"
#include "train/classroom/shell.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t indent_of(const std::string& line) {
  const std::size_t n = line.find_first_not_of(" \t");
  return n == std::string::npos ? line.size() : n;
}

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// Writes `text` to `path` only when it differs, so the build recompiles only what changed.
void write_if_changed(const fs::path& path, const std::string& text) {
  if (fs::exists(path) && read_text(path) == text) return;
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::vector<std::vector<std::string>> student_regions(const std::string& path, const std::string& student_text,
                                                      const std::string& word, int count) {
  const std::vector<std::string> lines = lines_of(student_text);
  const std::string marker = "// EXERCISE(" + word + "):";
  std::vector<std::vector<std::string>> regions;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!trim(lines[i]).starts_with(marker)) continue;
    const std::size_t indent = indent_of(lines[i]);
    std::size_t at = i + 1;
    while (at < lines.size() && trim(lines[at]).starts_with("//")) ++at;  // the rest of the comment
    std::vector<std::string> region;
    for (; at < lines.size(); ++at) {
      const std::string t = trim(lines[at]);
      if (t.starts_with("}") && indent_of(lines[at]) < indent) break;  // the function's closing brace
      region.push_back(lines[at]);
    }
    if (at == lines.size())
      throw std::invalid_argument(path + ":" + std::to_string(i + 1) + ": EXERCISE(" + word +
                                  ") is not followed by the end of its function");
    regions.push_back(std::move(region));
    i = at;
  }
  if (static_cast<int>(regions.size()) != count)
    throw std::invalid_argument(path + ": expected " + std::to_string(count) + " // EXERCISE(" + word +
                                "): comment(s), as in the handout, found " + std::to_string(regions.size()));
  return regions;
}

std::string merge_student_file(const std::string& path, const std::string& teacher_text,
                               const std::string& student_text, const std::vector<std::string>& words,
                               const std::set<std::string>& teachers_parts) {
  const std::string text = resolve_related(path, teacher_text, {});  // the teacher's code, markers dropped
  const std::vector<SolutionRegion> regions = find_solution_regions(path, text);
  std::map<std::string, std::vector<std::vector<std::string>>> written;  // word -> the student's regions
  for (const std::string& w : words) {
    const auto n = std::count_if(regions.begin(), regions.end(), [&](const SolutionRegion& r) { return r.word == w; });
    if (n > 0) written[w] = student_regions(path, student_text, w, static_cast<int>(n));
  }
  std::map<std::string, std::size_t> used;
  const std::vector<std::string> lines = lines_of(text);
  std::string out;
  std::size_t next = 0;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const int no = i + 1;
    if (next < regions.size() && no == regions[next].begin_line) {
      const SolutionRegion& r = regions[next++];
      if (written.count(r.word)) {
        const std::vector<std::string>& mine = written[r.word][used[r.word]++];
        if (teachers_parts.count(region_function(lines, r.exercise_line))) continue;  // the teacher's, markers dropped
        for (const std::string& l : mine) out += l + "\n";
        i = r.end_line - 1;  // the teacher's solution and END line give way
      }
      continue;  // BEGIN's line
    }
    if (next > 0 && no == regions[next - 1].end_line) continue;  // an unchosen region's END
    out += lines[i] + "\n";
  }
  return out;
}

std::vector<std::string> programs_for(const fs::path& tests_dir, const std::string& word) {
  std::vector<std::string> programs;
  for (const std::string& p : test_programs()) {
    const fs::path program = tests_dir / p;
    if (!fs::is_regular_file(program))
      throw std::invalid_argument("grade: the teacher's test program " + program.string() +
                                  " is not built (cmake --build --preset release)");
    const CommandResult listed =
        run_shell(shell_quote(program.string()) + " --list-test-names-only " + shell_quote("[" + word + "]"), Stderr::dropped);
    if (listed.status >= 0 && !trim(listed.output).empty()) programs.push_back(p);
  }
  return programs;
}

namespace {

std::vector<std::string> exercise_files(const std::vector<std::string>& words) {
  std::vector<std::string> files;
  for (const std::string& w : words)
    for (const std::string& f : require_exercise(w, "grade --student").where)
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  return files;
}

// One exercise file of the grading tree: the teacher's, with the lines `student_text(path,
// teacher text)` gives merged in (rewritten only when it differs, so the build is incremental).
template <class StudentText>
void sync_exercise_file(const GradingTree& tree, const std::string& f, const std::vector<std::string>& words,
                        StudentText student_text, const std::set<std::string>& teachers_parts = {}) {
  const std::string teacher = read_text(tree.teacher / f);
  write_if_changed(tree.work / "tree" / f, merge_student_file(f, teacher, student_text(f, teacher), words, teachers_parts));
}

// The grading tree for one copy: every teacher file, the exercises' files merged.
template <class StudentText>
void sync_tree(const GradingTree& tree, const std::vector<std::string>& words, StudentText student_text) {
  const std::vector<std::string> merged = exercise_files(words);
  for (const std::string& f : source_files(tree.teacher)) {
    if (std::find(merged.begin(), merged.end(), f) != merged.end()) sync_exercise_file(tree, f, words, student_text);
    else write_if_changed(tree.work / "tree" / f, read_text(tree.teacher / f));
  }
}

struct TreeBuild {
  std::vector<std::vector<std::string>> programs;  // per word
  std::string log;
  int status = 0;
};

// Builds (reference preset) the test programs that hold the words' tests.
TreeBuild build_tree(const GradingTree& tree, const std::vector<std::string>& words, const fs::path& teacher_tests_dir,
                     const std::string& name, std::ostream& progress) {
  TreeBuild b;
  std::vector<std::string> targets;
  for (const std::string& w : words) {
    b.programs.push_back(programs_for(teacher_tests_dir, w));
    for (const std::string& p : b.programs.back())
      if (std::find(targets.begin(), targets.end(), p) == targets.end()) targets.push_back(p);
  }
  if (targets.empty()) return b;
  const fs::path work_tree = tree.work / "tree";
  std::string command = "cd " + shell_quote(work_tree.string()) + " && ";
  if (!fs::exists(work_tree / "build" / "reference" / "CMakeCache.txt")) command += "cmake --preset reference >/dev/null && ";
  command += "cmake --build --preset reference --target";
  for (const std::string& t : targets) command += " " + t;
  progress << name << ": building";
  for (const std::string& t : targets) progress << " " << t;
  progress << " in " << work_tree.string() << " (the first build takes minutes) / 构建中\n" << std::flush;
  const CommandResult built = run_shell(command, Stderr::merged);
  b.log = built.output, b.status = built.status;
  return b;
}

// Each word's grade in the built tree; every word an error when the build failed.
std::vector<ExerciseGrade> run_tests(const GradingTree& tree, const std::vector<std::string>& words, const TreeBuild& b,
                                     const std::map<std::string, std::set<std::string>>& not_counted) {
  std::vector<ExerciseGrade> grades;
  for (std::size_t k = 0; k < words.size(); ++k) {
    const Exercise& e = require_exercise(words[k], "grade --student");
    if (b.status != 0) {
      grades.push_back({e.word, e.title, e.title_zh, GradeStatus::error, 0, 0, 0, "-", "build: " + first_build_error(b.log)});
      continue;
    }
    GradeOptions opt;
    opt.tests_dir = tree.work / "tree" / "build" / "reference" / "tests";
    opt.source_root = (tree.work / "tree").string();
    opt.programs = b.programs[k];
    opt.test_spec = [](const std::string& word) { return "[" + word + "]"; };
    opt.run_gradcheck = false;
    if (const auto it = not_counted.find(e.word); it != not_counted.end()) opt.not_counted = it->second;
    grades.push_back(grade_exercise(e, opt));
  }
  return grades;
}

}  // namespace

std::map<std::string, std::set<std::string>> stub_baseline(const GradingTree& tree, const std::vector<std::string>& words,
                                                           const fs::path& teacher_tests_dir, std::ostream& progress) {
  sync_tree(tree, words, [&](const std::string& f, const std::string& teacher) { return handout_text(f, teacher, words); });
  const TreeBuild b = build_tree(tree, words, teacher_tests_dir, "the untouched handout", progress);
  if (b.status != 0) throw std::runtime_error("grade: the untouched handout does not build: " + first_build_error(b.log));
  std::map<std::string, std::set<std::string>> passing;
  for (std::size_t k = 0; k < words.size(); ++k)
    for (const std::string& p : b.programs[k]) {
      const fs::path program = tree.work / "tree" / "build" / "reference" / "tests" / p;
      const std::string xml = run_shell(shell_quote(program.string()) + " " + shell_quote("[" + words[k] + "]") + " -r xml", Stderr::dropped).output;
      for (const std::string& name : parse_catch_xml(xml).passed_names) passing[words[k]].insert(name);
    }
  return passing;
}

StudentGrade grade_student(const GradingTree& tree, const fs::path& student_dir, const std::vector<std::string>& words,
                           const fs::path& teacher_tests_dir, std::ostream& progress,
                           const std::map<std::string, std::set<std::string>>& not_counted) {
  StudentGrade s{fs::absolute(student_dir).lexically_normal().filename().string(), {}, {}};
  if (s.name.empty()) s.name = fs::absolute(student_dir).lexically_normal().parent_path().filename().string();
  const auto student_text = [&](const std::string& f, const std::string&) {
    if (!fs::is_regular_file(student_dir / f))
      throw std::invalid_argument(student_dir.string() + ": " + f + " is missing (is it a handout copy?)");
    return read_text(student_dir / f);
  };
  sync_tree(tree, words, student_text);
  s.grades = run_tests(tree, words, build_tree(tree, words, teacher_tests_dir, s.name, progress), not_counted);
  // The parts: all of them work when the exercise is done; otherwise each is tried alone.
  for (std::size_t k = 0; k < words.size(); ++k) {
    const Exercise& e = require_exercise(words[k], "grade --student");
    std::vector<PartResult> parts;
    bool tried_alone = false;
    for (std::size_t i = 0; i < e.functions.size(); ++i) {
      PartResult p{e.functions[i], part_weight(e, i), s.grades[k].status == GradeStatus::done};
      if (!p.works && e.functions.size() > 1 && s.grades[k].status == GradeStatus::failing) {
        std::set<std::string> others(e.functions.begin(), e.functions.end());
        others.erase(e.functions[i]);
        for (const std::string& f : e.where) sync_exercise_file(tree, f, words, student_text, others);
        tried_alone = true;
        const TreeBuild b = build_tree(tree, {e.word}, teacher_tests_dir, s.name + " (" + e.functions[i] + " alone)", progress);
        p.works = run_tests(tree, {e.word}, b, not_counted).front().status == GradeStatus::done;
      }
      parts.push_back(p);
    }
    // The student's code back in every region before the next exercise's parts are tried.
    if (tried_alone)
      for (const std::string& f : e.where) sync_exercise_file(tree, f, words, student_text);
    s.parts.push_back(std::move(parts));
  }
  return s;
}

std::string part_score(const std::vector<PartResult>& parts) {
  int got = 0, all = 0;
  for (const PartResult& p : parts) got += p.works ? p.weight : 0, all += p.weight;
  return std::to_string(got) + "/" + std::to_string(all);
}

std::string gradebook_csv(const std::vector<StudentGrade>& students, const std::vector<std::string>& words) {
  std::string out = "student";
  for (const std::string& w : words) out += "," + w + "," + w + " tests," + w + " score";
  out += ",done,total,first failure\n";
  for (const StudentGrade& s : students) {
    out += csv_field(s.name);
    int done = 0;
    std::string first;
    for (std::size_t k = 0; k < s.grades.size(); ++k) {
      const ExerciseGrade& g = s.grades[k];
      const char* status = g.status == GradeStatus::done ? "done" : g.status == GradeStatus::failing ? "failing" : "error";
      out += std::string(",") + status + "," + std::to_string(g.tests_passed) + "/" + std::to_string(g.tests_total);
      out += ',';
      out += k < s.parts.size() ? part_score(s.parts[k]) : "-";
      done += g.status == GradeStatus::done;
      if (first.empty() && g.status != GradeStatus::done) first = g.word + ": " + g.first_failure;
    }
    out += ',';
    out += std::to_string(done);
    out += ',';
    out += std::to_string(s.grades.size());
    out += ',';
    out += csv_field(first);
    out += '\n';
  }
  return out;
}

}  // namespace sf::train
