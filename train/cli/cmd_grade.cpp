// `scratchformer grade [--build] [--exercise W]... [--json]`: grades the exercises of a handout (or all of
// them in the teacher's tree): each one's gradcheck entry and its tagged Catch2 tests
// (train/classroom/grade.h), one row per exercise as it finishes, a total and a GRADE line.
// Exit status 0 when every exercise is done, 1 when some are not, 2 on bad input or a grade error.
// On the teacher's side, `grade --student DIR` and `grade --collect DIR... [--csv FILE]` grade
// student copies in a clean tree with the teacher's tests (train/classroom/grade_student.h).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"
#include "train/classroom/grade.h"
#include "train/classroom/grade_student.h"
#include "train/classroom/handout.h"
#include "train/cli/commands.h"
#include "train/data_folder.h"  // program_folder

namespace sf::cli {

namespace {

namespace fs = std::filesystem;

struct GradeArgs {
  std::vector<std::string> exercises;  // empty: those of the handout
  bool json = false;
  std::string tests_dir;               // empty: <directory of this program>/tests
  std::string source;                  // empty: the checkout this program runs from
  std::vector<std::string> students;   // --student DIR (one) or --collect DIR... (a class)
  bool collect = false;
  std::string work;                    // empty: <source>/build/grading
  std::string csv;                     // --collect: the gradebook file (empty: standard output)
  bool build = false;                  // rebuild what changed first (and rerun the rebuilt program)
};

fs::path program_dir() {
  const fs::path self = train::program_folder();
  return self.empty() ? fs::current_path() : self;
}

// The exercises to grade: --exercise, else the handout's manifest, else (the teacher's tree) all.
std::vector<std::string> words_to_grade(const GradeArgs& a) {
  for (const std::string& w : a.exercises) train::require_exercise(w, "grade --exercise");
  if (!a.exercises.empty()) return a.exercises;
  if (auto words = train::read_handout_manifest(a.source)) return *words;
  std::vector<std::string> all;
  for (const train::Exercise& e : train::exercises()) all.push_back(e.word);
  return all;
}

// The exercises a student copy asks for: --exercise, else its handout.json.
std::vector<std::string> student_words(const GradeArgs& a, const fs::path& dir) {
  for (const std::string& w : a.exercises) train::require_exercise(w, "grade --exercise");
  if (!a.exercises.empty()) return a.exercises;
  if (auto words = train::read_handout_manifest(dir)) return *words;
  throw std::invalid_argument("grade: " + dir.string() + " has no handout.json; name the exercises with --exercise");
}

// Teacher-side grading of one copy (--student) or a class (--collect): a table per student, and
// for --collect the CSV gradebook.
int run_grade_students(const GradeArgs& a) {
  train::GradingTree tree{a.source, a.work.empty() ? fs::path(a.source) / "build" / "grading" : fs::path(a.work)};
  const fs::path tests_dir = a.tests_dir.empty() ? program_dir() / "tests" : fs::path(a.tests_dir);
  for (const std::string& d : a.students)
    if (!fs::is_directory(d)) throw std::invalid_argument("grade: student copy " + d + " is not a directory");
  const std::vector<std::string> words = student_words(a, a.students.front());
  // Tests that pass on the untouched handout give credit for nothing: found once, left out.
  const auto not_counted = train::stub_baseline(tree, words, tests_dir, std::cerr);
  std::vector<train::StudentGrade> graded;
  bool all_done = true;
  for (const std::string& d : a.students) {
    graded.push_back(train::grade_student(tree, d, student_words(a, d), tests_dir, std::cerr, not_counted));
    const train::StudentGrade& s = graded.back();
    std::cerr << s.name << ":\n" << train::format_grade_header();
    for (std::size_t k = 0; k < s.grades.size(); ++k) {
      std::cerr << train::format_grade_row(s.grades[k]);
      all_done &= s.grades[k].status == train::GradeStatus::done;
      if (s.parts[k].size() < 2) continue;
      std::cerr << std::string(20, ' ') << "parts / 部分:";
      for (const train::PartResult& p : s.parts[k])
        std::cerr << " " << p.function << (p.works ? " works" : " fails") << " (" << p.weight << ")";
      std::cerr << " = " << train::part_score(s.parts[k]) << "\n";
    }
    std::cerr << train::format_grade_total(graded.back().grades) << "\n";
  }
  const std::string book = train::gradebook_csv(graded, words);
  if (!a.collect || a.csv.empty()) {
    std::cout << book;
  } else {
    std::ofstream out(a.csv);
    out << book;
    if (!out) throw std::runtime_error("grade --csv: cannot write " + a.csv);
    std::cerr << "wrote " << a.csv << " (" << graded.size() << " students) / 已写入成绩表\n";
  }
  return all_done ? 0 : 1;
}

// Set in the environment of the program `grade --build` re-runs, so that it grades instead of
// building again.
constexpr const char* kRebuiltVariable = "SCRATCHFORMER_GRADE_REBUILT";

// This program's own command line, read back from /proc.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

// `grade --build`: rebuilds the test programs this build has and the program itself (the
// gradcheck entries run inside it, so it must hold the student's latest code too). When the
// program was rebuilt it is run again, with the same arguments, to grade.
void rebuild_then_rerun(const GradeArgs& a) {
  if (std::getenv(kRebuiltVariable)) return;  // the rerun: already built
  const fs::path build_dir = program_dir();
  const fs::path tests_dir = a.tests_dir.empty() ? build_dir / "tests" : fs::path(a.tests_dir);
  std::vector<std::string> targets;
  for (const std::string& p : train::test_programs())
    if (fs::is_regular_file(tests_dir / p)) targets.push_back(p);
  targets.push_back("scratchformer");
  const fs::path self = build_dir / "scratchformer";
  std::error_code ec;
  const auto before = fs::last_write_time(self, ec);
  std::cerr << "building what changed / 重新构建改动的部分: cmake --build " << build_dir.string() << "\n" << std::flush;
  const train::RebuildResult r = train::rebuild(build_dir, targets, std::cerr);
  if (r.status != 0)
    throw std::invalid_argument("grade --build: the build failed / 构建失败: " + r.first_error);
  if (fs::last_write_time(self, ec) == before) return;  // nothing of the program changed
  std::vector<std::string> args = own_arguments();
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  setenv(kRebuiltVariable, "1", 1);
  std::cerr << "running the rebuilt program / 运行新构建的程序\n" << std::flush;
  execv(self.c_str(), argv.data());
  throw std::runtime_error("grade --build: cannot run the rebuilt " + self.string());
}

int run_grade(GradeArgs a) {
  if (a.source.empty()) a.source = checkout_folder("grade");
  if (!a.students.empty()) return run_grade_students(a);
  if (a.build) rebuild_then_rerun(a);
  const std::vector<std::string> words = words_to_grade(a);
  train::GradeOptions opt;
  opt.tests_dir = a.tests_dir.empty() ? program_dir() / "tests" : fs::path(a.tests_dir);
  opt.source_root = a.source;
  // The programs this build has (the student preset builds some): grade counts what ctest runs.
  std::string missing;
  std::erase_if(opt.programs, [&](const std::string& p) {
    const bool absent = !fs::is_regular_file(opt.tests_dir / p);
    if (absent) missing += (missing.empty() ? "" : ", ") + p;
    return absent;
  });
  if (opt.programs.empty())
    throw std::invalid_argument("grade: no test program in " + opt.tests_dir.string() +
                                "; build the tests first (cmake --build --preset student, or release)");
  if (!missing.empty() && !a.json)
    std::cerr << "not built, their tests not counted / 未构建，不计其测试: " << missing << "\n";
  if (!a.json) std::cout << train::format_grade_header() << std::flush;
  std::vector<train::ExerciseGrade> grades;
  for (const std::string& w : words) {
    grades.push_back(train::grade_exercise(train::require_exercise(w, "grade"), opt));
    if (!a.json) std::cout << train::format_grade_row(grades.back()) << std::flush;
  }
  if (a.json) {
    std::cout << train::grade_json_document(grades);
  } else {
    std::cout << train::format_grade_total(grades) << "\n" << train::grade_json_line(grades) << "\n";
  }
  bool error = false, failing = false;
  for (const train::ExerciseGrade& g : grades)
    error |= g.status == train::GradeStatus::error, failing |= g.status == train::GradeStatus::failing;
  return error ? 2 : failing ? 1 : 0;
}

}  // namespace

Command add_grade_command(CLI::App& app) {
  auto a = std::make_shared<GradeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "grade", "Grade the exercises of this handout: gradcheck and tests of each, a table and a GRADE line "
               "(exit status 0 all done, 1 some not, 2 bad input)");
  cmd->add_option("--exercise", a->exercises, "An exercise to grade (repeatable; default: those of the handout): " +
                                                  train::exercise_words());
  cmd->add_flag("--json", a->json, "Print every row as one JSON document instead of the table");
  cmd->add_option("--tests-dir", a->tests_dir, "Where the test programs are (default: tests/ beside this program)");
  cmd->add_option("--source", a->source, "The source tree whose handout.json lists the exercises (default: the checkout this program runs from)");
  CLI::Option* student = cmd->add_option(
      "--student", a->students, "Teacher: grade this student copy of a handout with the teacher's tests, in a clean tree");
  CLI::Option* collect = cmd->add_option("--collect", a->students,
                                         "Teacher: grade every student copy given (DIR...) into a CSV gradebook");
  student->expected(1)->excludes(collect);
  collect->expected(1, -1)->each([a](const std::string&) { a->collect = true; });
  cmd->add_flag("--build", a->build,
                "Rebuild what changed (the test programs and this program) before grading")
      ->excludes(student)
      ->excludes(collect);
  cmd->add_option("--work", a->work, "Teacher: where the clean grading tree and its build live (default: build/grading)");
  cmd->add_option("--csv", a->csv, "Teacher, with --collect: write the gradebook here instead of standard output");
  return {cmd, [a] { return run_grade(*a); }};
}

}  // namespace sf::cli
