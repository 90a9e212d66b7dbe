// Exercise mode: hand out the repository with chosen backward functions removed.
//
// A teacher configures with a list of exercises,
//
//     cmake --preset debug -DSCRATCHFORMER_EXERCISES="softmax;layer_norm;matmul"
//     cmake --preset debug -DSCRATCHFORMER_EXERCISES=ON     # the default teaching set (CMakeLists.txt)
//
// and the first line of each chosen backward,
//
//     std::vector<Tensor> Softmax::backward(const Tensor& grad_out) {
//       SF_EXERCISE(Softmax);
//       ...the real code...
//
// then throws std::logic_error("exercise: implement Softmax::backward ..."): the gradient
// checks of that op fail with this message until the student writes the body (and deletes the
// SF_EXERCISE line, or rebuilds without the option). In a normal build the list is empty and
// SF_EXERCISE(X) is `if constexpr (false) ...`: no code is generated and the op reads as usual.
//
// Names match case-insensitively with underscores ignored: "layer_norm" selects
// SF_EXERCISE(LayerNorm), "matmul" selects SF_EXERCISE(MatMul).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

// Set by CMake from SCRATCHFORMER_EXERCISES (autograd/CMakeLists.txt); empty normally.
#ifdef SCRATCHFORMER_EXERCISE_LIST
#define SCRATCHFORMER_EXERCISE_MODE 1
#else
#define SCRATCHFORMER_EXERCISE_LIST ""
#endif

namespace sf::exercise {

// The exercises compiled into this build, ","-separated as CMake passed them ("MatMul,Softmax").
inline constexpr std::string_view kExercises = SCRATCHFORMER_EXERCISE_LIST;

// a and b equal ignoring case and '_' ("layer_norm" == "LayerNorm").
constexpr bool same_name(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  std::size_t i = 0, j = 0;
  while (true) {
    while (i < a.size() && a[i] == '_') ++i;
    while (j < b.size() && b[j] == '_') ++j;
    if (i == a.size() || j == b.size()) return i == a.size() && j == b.size();
    if (lower(a[i]) != lower(b[j])) return false;
    ++i, ++j;
  }
}

// True if `name` is one of the entries of `list`, separated by "," or ";".
constexpr bool listed(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const std::size_t end = list.find_first_of(",;");
    const std::string_view entry = list.substr(0, end);
    if (!entry.empty() && same_name(entry, name)) return true;
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return false;
}

// The message a student sees in the failing test or `scratchformer gradcheck` row. `file` is
// where the backward is (__FILE__), shown from "autograd/" on.
inline std::string message(const char* node, std::string_view file = "") {
  const std::size_t at = file.rfind("autograd/");
  const std::string where(at == std::string_view::npos ? file : file.substr(at));
  return std::string("exercise: implement ") + node + "::backward" + (where.empty() ? "" : " in " + where) +
         ", below its forward; check it with `scratchformer gradcheck` or `ctest -L grad`";
}

}  // namespace sf::exercise

// SF_EXERCISE_IN(list, X): throws the exercise message when X is in `list` (a compile-time
// string). Tests use it with a list of their own; op code uses SF_EXERCISE(X).
#define SF_EXERCISE_IN(list, NodeType)                                    \
  do {                                                                    \
    if constexpr (::sf::exercise::listed(list, #NodeType))                \
      throw std::logic_error(::sf::exercise::message(#NodeType, __FILE__)); \
  } while (false)

// The first line of a backward that can be handed out as an exercise.
#define SF_EXERCISE(NodeType) SF_EXERCISE_IN(::sf::exercise::kExercises, NodeType)
