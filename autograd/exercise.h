// Exercises: a handout is a copy of the repository in which chosen functions have their
// solution cut out (`scratchformer handout`), so the answer is not in the student's tree.
//
// Each exercise has one name, a snake_case word that is also its Catch2 tag and ctest label and
// its `scratchformer gradcheck --module` entry, in course order: matmul linear relu embedding
// scaled_dot_product masks sinusoidal rope multi_head layer_norm softmax cross_entropy kv_cache
// greedy. In the teacher's tree the code of an exercise is marked like this:
//
//     Tensor causal_mask(std::int64_t t_q, std::int64_t t_k, std::int64_t q_start) {
//       ...argument checks (stay in the handout)...
//       // EXERCISE(masks): what to implement, the shapes, the formula in words
//       // (one or more `//` lines; they stay in the handout)
//       // BEGIN SOLUTION
//       ...the solution...
//       // END SOLUTION
//     }
//
// The handout replaces everything from `// BEGIN SOLUTION` to `// END SOLUTION` (both lines
// included; they stand alone on their lines, at the same indentation) by one line at that
// indentation:
//
//       sf::exercise::not_implemented("masks", __func__, __FILE__);
//
// so a region is the whole body of a function, or its whole tail after the argument checks:
// nothing may follow `// END SOLUTION` inside the function, and the code before the region must
// not need anything defined inside it. An exercise may have several regions (several functions
// or files), all with the same word. A file with a region includes this header.
//
// The student's tree then compiles; calling a stubbed function throws std::logic_error with
// message(word, function, file), which the exercise's tests (`ctest -L masks`), its gradcheck
// row (`scratchformer gradcheck --module masks`) and `scratchformer grade --exercise masks` show.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sf::exercise {

// `file` (a __FILE__, usually absolute) from its last folder of the framework on:
// "/home/me/scratchformer/nn/attention.cpp" -> "nn/attention.cpp". A path without one of
// autograd/ nn/ data/ train/ is returned whole.
inline std::string_view source_path(std::string_view file) {
  constexpr std::array<std::string_view, 4> kFolders = {"autograd/", "nn/", "data/", "train/"};
  std::size_t from = std::string_view::npos;
  for (std::size_t at = 0; at < file.size(); ++at) {
    if (at > 0 && file[at - 1] != '/') continue;  // only where a path component starts
    for (std::string_view folder : kFolders)
      if (file.substr(at).starts_with(folder)) from = at;
  }
  return from == std::string_view::npos ? file : file.substr(from);
}

// The message of a stubbed exercise:
//   exercise: implement causal_mask (exercise masks) in nn/attention.cpp; check it with
//   `scratchformer grade --exercise masks`, `ctest -L masks` or `scratchformer gradcheck --module masks`
// function: the stubbed function's __func__; file: its __FILE__.
inline std::string message(std::string_view word, std::string_view function, std::string_view file) {
  const std::string w(word);
  return "exercise: implement " + std::string(function) + " (exercise " + w + ") in " +
         std::string(source_path(file)) + "; check it with `scratchformer grade --exercise " + w + "`, `ctest -L " +
         w + "` or `scratchformer gradcheck --module " + w + "`";
}

// What a handout puts in place of a solution region: throws std::logic_error(message(...)).
[[noreturn]] inline void not_implemented(std::string_view word, std::string_view function, std::string_view file) {
  throw std::logic_error(message(word, function, file));
}

}  // namespace sf::exercise
