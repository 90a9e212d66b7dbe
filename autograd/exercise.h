// Exercise mode: hand out the repository with chosen backward functions removed.
//
// Each exercise has one name, a snake_case word that is also its ctest label and its
// `scratchformer gradcheck --module`: matmul linear softmax layer_norm embedding cross_entropy
// relu (the list is SCRATCHFORMER_EXERCISABLE in autograd/CMakeLists.txt). A teacher
// configures with some of them,
//
//     cmake --preset debug -DSCRATCHFORMER_EXERCISES="softmax;layer_norm;matmul"
//     cmake --preset debug -DSCRATCHFORMER_EXERCISES=ON     # all of them
//
// and the first line of each chosen backward,
//
//     std::vector<Tensor> Softmax::backward(const Tensor& grad_output) {
//       SF_EXERCISE(softmax);
//       ...the real code...
//
// then throws std::logic_error("exercise: implement Softmax::backward ..."): the gradient
// checks of that op fail with this message until the student writes the body (and deletes the
// SF_EXERCISE line, or rebuilds without the option). In a normal build the list is empty and
// SF_EXERCISE(word) is `if constexpr (false) ...`: no code is generated and the op reads as usual.
//
// Names match case-insensitively with underscores ignored, so the CamelCase spellings of
// earlier versions still work on the command line: "LayerNorm" selects SF_EXERCISE(layer_norm).
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

// The exercises compiled into this build, ","-separated as CMake passed them ("matmul,softmax").
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

// The message a student sees in the failing test or `scratchformer gradcheck` row:
// "exercise: implement Softmax::backward in autograd/ops_softmax.cpp, below its forward; check
// it with `ctest -L softmax` or `scratchformer gradcheck --module softmax`". `node` is the op
// whose backward to write, `file` where it is (__FILE__, shown from "autograd/" on), `word` the
// exercise's name (without it the checks named are all of them: `ctest -L grad`).
inline std::string message(std::string_view node, std::string_view file = "", std::string_view word = "") {
  const std::size_t at = file.rfind("autograd/");
  const std::string where(at == std::string_view::npos ? file : file.substr(at));
  const std::string checks = word.empty() ? std::string("`scratchformer gradcheck` or `ctest -L grad`")
                                          : "`ctest -L " + std::string(word) + "` or `scratchformer gradcheck --module " +
                                                std::string(word) + "`";
  return "exercise: implement " + std::string(node) + "::backward" + (where.empty() ? "" : " in " + where) +
         ", below its forward; check it with " + checks;
}

}  // namespace sf::exercise

// SF_EXERCISE_IN(list, NodeType): throws the exercise message for NodeType::backward when
// NodeType matches an entry of `list` (a compile-time string). For tests, with a list of their
// own; op code uses SF_EXERCISE(word).
#define SF_EXERCISE_IN(list, NodeType)                                      \
  do {                                                                      \
    if constexpr (::sf::exercise::listed(list, #NodeType))                  \
      throw std::logic_error(::sf::exercise::message(#NodeType, __FILE__)); \
  } while (false)

// The first line of a backward that can be handed out as the exercise `word` (one of
// SCRATCHFORMER_EXERCISABLE): SF_EXERCISE(layer_norm) at the top of LayerNorm::backward. The
// message names the op by the node's name() ("LayerNorm"), so the macro is for Node::backward.
#define SF_EXERCISE(word)                                                              \
  do {                                                                                 \
    if constexpr (::sf::exercise::listed(::sf::exercise::kExercises, #word))           \
      throw std::logic_error(::sf::exercise::message(this->name(), __FILE__, #word)); \
  } while (false)
