// Shared by the sacreBLEU-compatible metric tests (test_bleu.cpp, test_chrf.cpp): reading the
// cases sacreBLEU 2.6.0 computed, and the message of an expected std::invalid_argument.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

namespace sf::testing {

// The JSON array in tests/data/<name> (sacrebleu_cases.json, sacrebleu_chrf_cases.json); fails
// the test, naming the path, when the file cannot be read.
inline nlohmann::json read_sacrebleu_cases(const std::string& name) {
  const std::string path = std::string(SCRATCHFORMER_TEST_DATA) + "/" + name;
  std::ifstream file(path);
  INFO("reading " << path);
  REQUIRE(file.good());
  return nlohmann::json::parse(file);
}

// The what() of the std::invalid_argument `f` throws, or a text saying it threw none.
inline std::string invalid_argument_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

}  // namespace sf::testing
