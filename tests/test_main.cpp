// The Catch2 main for every test executable. Threads are set once (one thread in the debug and
// asan presets) before any test runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>

#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"

namespace {

// `<tests> --list-labels`: one line per test case that runs by default (hidden ones left out, as
// --list-test-names-only does): its name, a tab, its tags as written ("[grad][linear]").
// cmake/CatchListTests.cmake registers the tests with CTest from it, each labelled with its tags,
// in one run of the program instead of one run per tag (under ASan each run costs half a second,
// and train_tests has a hundred tags).
int list_labels() {
  Catch::Session session;
  for (const Catch::TestCase& test : Catch::getAllTestCasesSorted(session.config()))
    if (!test.isHidden()) std::cout << test.name << '\t' << test.tagsAsString() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  sf::restart_with_native_blas(argv);  // the kernels the program will use (blas_core.h)
  if (argc == 2 && std::strcmp(argv[1], "--list-labels") == 0) return list_labels();
  sf::init_threads();
  return Catch::Session().run(argc, argv);
}
