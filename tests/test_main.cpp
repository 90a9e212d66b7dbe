// The Catch2 main for every test executable. Threads are set once (one thread in the debug and
// asan presets) before any test runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "autograd/runtime/threads.h"

int main(int argc, char* argv[]) {
  sf::init_threads();
  return Catch::Session().run(argc, argv);
}
