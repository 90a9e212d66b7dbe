// Grading (grade.h): the Catch2 XML reader, one exercise's grade, the table and the GRADE line.
#include "train/classroom/grade.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "train/classroom/gradcheck_suite.h"
#include "train/classroom/shell.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

// ---- a reader for the XML subset Catch2 writes: elements, attributes, text, five entities ----

struct XmlEvent {
  enum Kind { open, close, text } kind;
  std::string name;                           // element name (open, close)
  std::map<std::string, std::string> attrs;   // open only
  bool self_closing = false;                  // open only: <OverallResult .../>
  std::string body;                           // text only, entities decoded, trimmed
};

std::string xml_unescape(const std::string& s) {
  static const std::pair<const char*, char> kEntities[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    bool replaced = false;
    if (s[i] == '&')
      for (const auto& [entity, c] : kEntities)
        if (s.compare(i, std::char_traits<char>::length(entity), entity) == 0) {
          out += c, i += std::char_traits<char>::length(entity) - 1, replaced = true;
          break;
        }
    if (!replaced) out += s[i];
  }
  return out;
}

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// The attributes of a tag's inside ("Expression success=\"false\" line=\"6\"").
XmlEvent parse_tag(const std::string& inside) {
  XmlEvent e{XmlEvent::open, "", {}, false, ""};
  std::string s = inside;
  if (!s.empty() && s.back() == '/') e.self_closing = true, s.pop_back();
  std::size_t i = s.find_first_of(" \t\r\n");
  e.name = s.substr(0, i);
  while (i != std::string::npos && i < s.size()) {
    const std::size_t eq = s.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = trim(s.substr(i, eq - i));
    const std::size_t q1 = s.find('"', eq), q2 = q1 == std::string::npos ? q1 : s.find('"', q1 + 1);
    if (q2 == std::string::npos) break;
    e.attrs[key] = xml_unescape(s.substr(q1 + 1, q2 - q1 - 1));
    i = q2 + 1;
  }
  return e;
}

std::vector<XmlEvent> xml_events(const std::string& xml) {
  std::vector<XmlEvent> events;
  std::size_t i = 0;
  while (i < xml.size()) {
    const std::size_t lt = xml.find('<', i);
    const std::string text = trim(xml.substr(i, lt == std::string::npos ? std::string::npos : lt - i));
    if (!text.empty()) events.push_back({XmlEvent::text, "", {}, false, xml_unescape(text)});
    if (lt == std::string::npos) break;
    const std::size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) break;  // cut short
    const std::string inside = xml.substr(lt + 1, gt - lt - 1);
    if (!inside.empty() && inside[0] == '/') events.push_back({XmlEvent::close, trim(inside.substr(1)), {}, false, ""});
    else if (!inside.empty() && inside[0] != '?' && inside[0] != '!') events.push_back(parse_tag(inside));
    i = gt + 1;
  }
  return events;
}

std::string shorter_path(const std::string& file, const std::string& source_root) {
  if (!source_root.empty() && file.starts_with(source_root + "/")) return file.substr(source_root.size() + 1);
  return file;
}

// Turns the events of one failing element (<Expression>, <Exception>, ...) into one message.
struct FailureBuilder {
  std::string kind, where, original, expanded, text;
  std::string message() const {
    // An exception thrown inside a checked expression: Catch2 nests it and has no expression text.
    if (kind == "Expression" && !text.empty()) return where + ": exception: " + text;
    if (kind == "Expression") return where + ": " + original + " got " + expanded;
    if (kind == "Exception") return where + ": exception: " + text;
    if (kind == "FatalErrorCondition") return where + ": fatal error: " + text;
    return where + ": " + text;
  }
};

bool is_failure_element(const XmlEvent& e) {
  if (e.name == "Expression") return e.attrs.count("success") && e.attrs.at("success") == "false";
  return e.name == "Exception" || e.name == "FatalErrorCondition" || e.name == "Failure";
}

// ---- running a program ---------------------------------------------------------------------

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names of the tests of `program` that `spec` selects.
std::vector<std::string> listed_tests(const fs::path& program, const std::string& spec) {
  const std::string out = run_shell(shell_quote(program.string()) + " --list-test-names-only " + shell_quote(spec), Stderr::dropped).output;
  std::vector<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (!trim(line).empty()) names.push_back(trim(line));
  return names;
}

// Runs `program` on `spec` with the XML reporter into a temporary file and reads the report.
CatchReport run_catch(const fs::path& program, const std::string& spec, const std::string& source_root) {
  std::string report_path = (fs::temp_directory_path() / "sf-grade-XXXXXX").string();
  const int fd = mkstemp(report_path.data());
  if (fd < 0) throw std::runtime_error("grade: cannot create a temporary file in " + fs::temp_directory_path().string());
  close(fd);
  run_shell(shell_quote(program.string()) + " " + shell_quote(spec) + " -r xml -o " + shell_quote(report_path) + " >/dev/null", Stderr::dropped);
  CatchReport r = parse_catch_xml(read_all(report_path), source_root);
  std::error_code ignored;
  fs::remove(report_path, ignored);
  if (!r.complete && r.first_failure.empty())
    r.first_failure = program.filename().string() + " stopped before writing its whole report (crashed?); run it on " + spec;
  return r;
}

// Runs the exercise's gradcheck entry; records "pass"/"FAIL" and the first failure.
void grade_gradcheck(const Exercise& e, ExerciseGrade& g) {
  const GradcheckEntry* entry = find_gradcheck(e.word);
  if (!entry) {
    g.gradcheck = "-";
    g.first_failure = "no gradcheck module named '" + e.word + "' (scratchformer gradcheck --list)";
    g.status = GradeStatus::error;
    return;
  }
  try {
    for (const GradcheckCase& c : entry->run(GradcheckOptions{}))
      if (!c.result.ok) {
        g.gradcheck = "FAIL";
        g.first_failure = "gradcheck " + e.word + (c.variant.empty() ? "" : " (" + c.variant + ")") + ": " + c.result.message;
        return;
      }
    g.gradcheck = "pass";
  } catch (const std::exception& ex) {
    g.gradcheck = "FAIL";
    g.first_failure = "gradcheck " + e.word + ": " + ex.what();
  }
}

// Every line of `s`, in full, each after `indent` spaces (the expected and got values of a failed
// check are what the student needs: nothing is cut).
std::string indented(const std::string& s, std::size_t indent) {
  std::string out = std::string(indent, ' ');
  for (char c : s) {
    if (c == '\r') continue;
    out += c == '\t' ? ' ' : c;
    if (c == '\n') out += std::string(indent, ' ');
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

// `s` followed by spaces up to `width` terminal columns (a CJK character takes two).
std::string pad(const std::string& s, std::size_t width) {
  std::size_t shown = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) shown += c >= 0xE0 ? 2 : 1;  // count lead bytes; 3- and 4-byte ones are wide
  return s + std::string(shown < width ? width - shown : 1, ' ');
}

const char* status_word(GradeStatus s) {
  return s == GradeStatus::done ? "done" : s == GradeStatus::failing ? "failing" : "error";
}

}  // namespace

const std::vector<std::string>& test_programs() {
  static const std::vector<std::string> kPrograms = {"autograd_tests", "nn_tests", "data_tests", "exercise_tests", "train_tests", "reference_tests"};
  return kPrograms;
}

CatchReport parse_catch_xml(const std::string& xml, const std::string& source_root) {
  CatchReport r;
  bool in_case = false, case_result_seen = false;
  std::string info;                   // the last <Info> of the open case
  std::string case_name;              // the open case's name
  std::optional<FailureBuilder> fail; // the failing element being read
  std::string field;                  // "Original" / "Expanded" inside it
  for (const XmlEvent& e : xml_events(xml)) {
    if (e.kind == XmlEvent::open && e.name == "TestCase") {
      in_case = true, case_result_seen = false, info.clear(), ++r.total;
      case_name = e.attrs.count("name") ? e.attrs.at("name") : "";
    } else if (e.kind == XmlEvent::open && e.name == "OverallResult" && in_case) {
      case_result_seen = true;
      if (e.attrs.count("success") && e.attrs.at("success") == "true") ++r.passed, r.passed_names.push_back(case_name);
    } else if (e.kind == XmlEvent::close && e.name == "TestCase") {
      in_case = false;
    } else if (e.kind == XmlEvent::close && e.name == "Catch") {
      r.complete = true;
    } else if (e.kind == XmlEvent::open && in_case && !fail && r.first_failure.empty() && is_failure_element(e)) {
      const std::string file = e.attrs.count("filename") ? shorter_path(e.attrs.at("filename"), source_root) : "?";
      fail = FailureBuilder{e.name, file + ":" + (e.attrs.count("line") ? e.attrs.at("line") : "?"), "", "", ""};
      if (e.self_closing) r.first_failure = fail->message(), fail.reset();
    } else if (e.kind == XmlEvent::open && (e.name == "Original" || e.name == "Expanded" || e.name == "Info")) {
      field = e.name;
    } else if (e.kind == XmlEvent::text) {
      if (field == "Info") info = e.body;
      else if (fail && field == "Original") fail->original = e.body;
      else if (fail && field == "Expanded") fail->expanded = e.body;
      else if (fail) fail->text = e.body;
    } else if (e.kind == XmlEvent::close && (e.name == "Original" || e.name == "Expanded" || e.name == "Info")) {
      field.clear();
    } else if (e.kind == XmlEvent::close && fail && e.name == fail->kind) {
      r.first_failure = fail->message() + (info.empty() ? "" : " (with " + info + ")");
      fail.reset();
    }
  }
  if (in_case && !case_result_seen && r.first_failure.empty())
    r.first_failure = "the test program stopped inside a test case (crashed?)";
  return r;
}

ExerciseGrade grade_exercise(const Exercise& e, const GradeOptions& opt) {
  ExerciseGrade g{e.word, e.title, e.title_zh, GradeStatus::failing, 0, 0, 0, "-", ""};
  if (opt.run_gradcheck) {
    grade_gradcheck(e, g);
    if (g.status == GradeStatus::error) return g;
  }
  const std::string spec = opt.test_spec ? opt.test_spec(e.word) : "[" + e.word + "]";
  std::string first_test_failure;
  bool all_passed = true;  // every test run passed, counted or not
  for (const std::string& name : opt.programs) {
    const fs::path program = opt.tests_dir / name;
    if (!fs::is_regular_file(program))
      throw std::invalid_argument("grade: test program " + program.string() + " not found; build the tests first (cmake --build --preset release)");
    const std::vector<std::string> listed = listed_tests(program, spec);
    if (listed.empty()) continue;
    const CatchReport r = run_catch(program, spec, opt.source_root);
    all_passed &= r.passed == r.total && r.complete;
    int left_out = 0, left_out_passed = 0;
    for (const std::string& t : listed) left_out += opt.not_counted.count(t) > 0;
    for (const std::string& t : r.passed_names) left_out_passed += opt.not_counted.count(t) > 0;
    g.not_counted += left_out;
    g.tests_passed += r.passed - left_out_passed, g.tests_total += r.total - left_out;
    if (first_test_failure.empty() && !r.first_failure.empty()) first_test_failure = name + ": " + r.first_failure;
  }
  if (g.first_failure.empty()) g.first_failure = first_test_failure;
  // A known mistake recognised (tests/test_diagnoses.cpp) says more than any number: it goes first.
  for (const std::string& name : g.first_failure.empty() ? std::vector<std::string>{} : opt.programs) {
    const fs::path program = opt.tests_dir / name;
    const std::string diagnosis_spec = "[" + e.word + "][diagnosis]";
    if (listed_tests(program, diagnosis_spec).empty()) continue;
    const CatchReport d = run_catch(program, diagnosis_spec, opt.source_root);
    if (!d.first_failure.empty() && d.first_failure.find("exception:") == std::string::npos) {
      g.first_failure = name + ": " + d.first_failure + (g.first_failure.empty() ? "" : "\n" + g.first_failure);
      break;
    }
  }
  if (g.tests_total + g.not_counted == 0) {
    g.status = GradeStatus::error;
    g.first_failure = "no test matches " + spec + " in " + opt.tests_dir.string() +
                      (g.first_failure.empty() ? "" : "; and " + g.first_failure);
    return g;
  }
  const bool tests_ok = all_passed && first_test_failure.empty();
  g.status = tests_ok && g.gradcheck != "FAIL" ? GradeStatus::done : GradeStatus::failing;
  return g;
}

std::string grade_status_label(GradeStatus s) {
  return s == GradeStatus::done ? "done / 完成" : s == GradeStatus::failing ? "failing / 未完成" : "error / 出错";
}

std::string format_grade_header() {
  return pad("exercise / 练习", 19) + " " + pad("result / 结果", 17) + " " + pad("tests", 7) + " " + pad("gradcheck", 9) +
         " title, first failure / 题目，第一处失败\n";
}

std::string format_grade_row(const ExerciseGrade& g) {
  std::string row = pad(g.word, 19) + " " + pad(grade_status_label(g.status), 17) + " " +
                    pad(std::to_string(g.tests_passed) + "/" + std::to_string(g.tests_total), 7) + " " + pad(g.gradcheck, 9) +
                    " " + g.title + " / " + g.title_zh;
  if (g.status == GradeStatus::failing)
    if (const Exercise* e = find_exercise(g.word)) {
      std::string fix;
      for (const std::string& f : e->functions) fix += (fix.empty() ? "" : ", ") + f;
      std::string files;
      for (const std::string& f : e->where) files += (files.empty() ? "" : ", ") + f;
      row += "\n" + std::string(20, ' ') + "to fix / 要改的函数: " + fix + " (" + files + ")";
    }
  if (!g.first_failure.empty()) row += "\n" + indented(g.first_failure, 20);
  if (g.not_counted > 0)
    row += "\n" + std::string(20, ' ') + std::to_string(g.not_counted) + " test(s) pass on the untouched handout: not counted / " +
           std::to_string(g.not_counted) + " 个测试在未改动的作业上即可通过，不计分";
  return row + "\n";
}

std::string format_grade_total(const std::vector<ExerciseGrade>& grades) {
  int done = 0;
  for (const ExerciseGrade& g : grades) done += g.status == GradeStatus::done;
  const std::string n = std::to_string(done) + "/" + std::to_string(grades.size());
  return n + " exercises done / 完成 " + n + " 个练习";
}

std::string grade_json_line(const std::vector<ExerciseGrade>& grades) {
  nlohmann::ordered_json j;
  int done = 0;
  j["exercises"] = nlohmann::ordered_json::object();
  for (const ExerciseGrade& g : grades) done += g.status == GradeStatus::done, j["exercises"][g.word] = status_word(g.status);
  nlohmann::ordered_json line;
  line["done"] = done;
  line["total"] = grades.size();
  line["exercises"] = j["exercises"];
  return "GRADE " + line.dump();
}

std::string grade_json_document(const std::vector<ExerciseGrade>& grades) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  int done = 0;
  for (const ExerciseGrade& g : grades) {
    done += g.status == GradeStatus::done;
    rows.push_back({{"exercise", g.word}, {"title", g.title}, {"title_zh", g.title_zh}, {"status", status_word(g.status)},
                    {"tests_passed", g.tests_passed}, {"tests_total", g.tests_total}, {"not_counted", g.not_counted},
                    {"gradcheck", g.gradcheck},
                    {"first_failure", g.first_failure}});
  }
  nlohmann::ordered_json doc{{"done", done}, {"total", grades.size()}, {"exercises", rows}};
  return doc.dump(2) + "\n";
}

RebuildResult rebuild(const fs::path& build_dir, const std::vector<std::string>& targets, std::ostream& progress) {
  if (!fs::is_regular_file(build_dir / "CMakeCache.txt"))
    throw std::invalid_argument("grade --build: " + build_dir.string() +
                                " is not a CMake build tree (it has no CMakeCache.txt); configure it first (cmake --preset student)");
  std::string command = "cmake --build " + shell_quote(build_dir.string()) + " --target";
  for (const std::string& t : targets) command += " " + shell_quote(t);
  const CommandResult r = run_shell(command, Stderr::merged, [&](const std::string& line) { progress << line << "\n" << std::flush; });
  return {r.status, r.status == 0 ? "" : first_build_error(r.output)};
}

}  // namespace sf::train
