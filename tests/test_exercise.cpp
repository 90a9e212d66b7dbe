// Exercise mode (autograd/exercise.h): SF_EXERCISE(X) is inert in a normal build and throws
// "exercise: implement X::backward" for the exercises CMake compiled in.
#include "test_util.h"

#include <sstream>

#include "autograd/exercise.h"
#include "autograd/ops.h"
#include "train/classroom/gradcheck_suite.h"

using namespace sf;
using Catch::Matchers::Contains;

namespace {

// Stand-ins for two backward functions, with an exercise list of the test's own.
constexpr std::string_view kTestExercises = "softmax,layer_norm";
int softmax_backward_stub() {
  SF_EXERCISE_IN(kTestExercises, Softmax);
  return 1;  // "the real code"
}
int matmul_backward_stub() {
  SF_EXERCISE_IN(kTestExercises, MatMul);
  return 2;
}

}  // namespace

TEST_CASE("exercise names match ignoring case and underscores", "[exercise]") {
  static_assert(exercise::same_name("layer_norm", "LayerNorm"));
  static_assert(exercise::same_name("MATMUL", "MatMul"));
  static_assert(!exercise::same_name("matmul", "MatMulX"));
  static_assert(!exercise::same_name("", "Relu"));
  CHECK(exercise::listed("softmax;layer_norm", "LayerNorm"));
  CHECK(exercise::listed("MatMul,Softmax", "Softmax"));
  CHECK(exercise::listed("relu", "Relu"));
  CHECK_FALSE(exercise::listed("softmax;layer_norm", "LogSoftmax"));
  CHECK_FALSE(exercise::listed("", "MatMul"));
  CHECK_FALSE(exercise::listed(";;", "MatMul"));
}

TEST_CASE("SF_EXERCISE throws the exercise message only for a listed backward", "[exercise]") {
  CHECK(matmul_backward_stub() == 2);
  try {
    softmax_backward_stub();
    FAIL("the Softmax stub should have thrown");
  } catch (const std::logic_error& e) {
    CHECK_THAT(e.what(), Contains("exercise: implement Softmax::backward"));
  }
}

TEST_CASE("the message of an op's stub names its backward, its file and the exercise's checks", "[exercise]") {
  const std::string m = exercise::message("LayerNorm", "/src/autograd/ops_norm.cpp", "layer_norm");
  CHECK_THAT(m, Contains("exercise: implement LayerNorm::backward in autograd/ops_norm.cpp"));
  CHECK_THAT(m, Contains("`ctest -L layer_norm`"));
  CHECK_THAT(m, Contains("`scratchformer gradcheck --module layer_norm`"));
}

TEST_CASE("in a normal build no exercise is compiled in and backward runs", "[exercise]") {
#ifdef SCRATCHFORMER_EXERCISE_MODE
  // an exercise-mode build (-DSCRATCHFORMER_EXERCISES=...): the list is what CMake passed
  CHECK_FALSE(exercise::kExercises.empty());
#else
  CHECK(exercise::kExercises.empty());
  for (const char* op : {"matmul", "linear", "softmax", "layer_norm", "embedding", "cross_entropy", "relu"})
    CHECK_FALSE(exercise::listed(exercise::kExercises, op));
  Generator gen(1);
  Tensor x = randn({2, 3}, gen).requires_grad_();
  REQUIRE_NOTHROW(sum(softmax(matmul(x, transpose(x, 0, 1)), -1)).backward());
  CHECK(x.grad().defined());
#endif
}

TEST_CASE("scratchformer gradcheck shows a check whose backward is an exercise as FAIL with the message",
          "[exercise][gradcheck]") {
  const train::GradcheckEntry stub{"softmax_exercise", "test", "a check whose backward throws as in exercise mode",
                                   [](const GradcheckOptions&) -> std::vector<train::GradcheckCase> {
                                     throw std::logic_error(exercise::message("Softmax"));
                                   }};
  const train::GradcheckEntry* linear = train::find_gradcheck("linear");
  REQUIRE(linear != nullptr);
  std::ostringstream out;
  CHECK_FALSE(train::run_gradcheck_table({&stub, linear}, out));
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("softmax_exercise"));
  CHECK_THAT(out.str(), Contains("FAIL"));
  CHECK_THAT(out.str(), Contains("softmax_exercise: exercise: implement Softmax::backward"));
  CHECK_THAT(out.str(), Contains("1 FAILED"));  // the linear check after it still ran and passed
}
