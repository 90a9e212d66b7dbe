// The course's exercises: one word each, in course order. The word is the same everywhere: the
// `// EXERCISE(word):` comment above a solution region in the code (autograd/exercise.h), the
// Catch2 tag and ctest label of its tests (`ctest -L masks`), its `scratchformer gradcheck
// --module`, and what `scratchformer handout --exercises` and `scratchformer grade --exercise` take.
//
//   for (const Exercise& e : exercises()) std::cout << e.word << "  " << e.title << "\n";
//   const Exercise& e = require_exercise("masks", "handout --exercises");  // or throws, listing the words
#pragma once

#include <string>
#include <vector>

namespace sf::train {

struct Exercise {
  std::string word;                // "masks": the tag, the gradcheck module, the EXERCISE(word) comment
  std::string title;               // one line of English: what the student writes
  std::string title_zh;            // the same in Chinese
  std::vector<std::string> where;  // the files holding its solution regions, from the source root
  std::string lecture;             // the lecture it belongs to: a word of lectures()
  std::vector<std::string> functions;  // the functions its regions are in: what to fix, where to break
  std::vector<int> weights;            // each function's share of the exercise's credit (empty: equal)
};

// The weight of part `i` (functions[i]) of `e`: weights[i], or 1 when the weights are not given.
int part_weight(const Exercise& e, std::size_t i);

// A lecture of the course and the exercises that go with it (`handout --lecture attention`).
struct Lecture {
  std::string word;      // "attention"
  std::string title;     // "scaled dot-product attention, masks, heads"
  std::string title_zh;  // the same in Chinese
};

// Every exercise, in course order (matmul first, greedy last).
const std::vector<Exercise>& exercises();
// The exercise called `word`, or nullptr.
const Exercise* find_exercise(const std::string& word);
// The exercise called `word`; otherwise throws std::invalid_argument
// "<context>: unknown exercise 'x'; valid: matmul, linear, ..." .
const Exercise& require_exercise(const std::string& word, const std::string& context);
// "matmul, linear, relu, ...": the words in course order, for error messages.
std::string exercise_words();
// The word of the registry closest to a misspelt one (at most two edits away, or a word it is
// the start of), or "" when none is close: "soft_max" -> "softmax".
std::string closest_exercise(const std::string& word);

// The course's lectures, in course order, and the exercises of one of them (course order).
const std::vector<Lecture>& lectures();
// The exercises of lecture `word`; otherwise throws std::invalid_argument naming the lectures.
std::vector<std::string> lecture_exercises(const std::string& word);

}  // namespace sf::train
