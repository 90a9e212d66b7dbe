// libFuzzer target: train/config.h load_config() on arbitrary TOML text and --set overrides.
//
// The input is the config file, except its lines starting with "#set ", which are passed as --set
// overrides (see fuzz_inputs.h). A bad config must give a ConfigError (or another std::exception), never a crash,
// a sanitizer report, a hang or a leak. A config that loads is also checked against config.h's
// promise about to_toml(): loading the effective config it writes gives back an equal Config, and
// writing that again gives the same text. A broken promise aborts with a message, which libFuzzer
// reports as a crash like any other.
//
// Run: tools/run_fuzzers.sh, or by hand:
//   build/fuzz/fuzz_config -dict=tests/fuzz/config.dict -max_len=4096 tests/fuzz/corpus/config
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "fuzz_inputs.h"
#include "train/config.h"

namespace {

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz_config: %s\n", what.c_str());
  std::abort();
}

// load_config(to_toml(c)) == c, and to_toml of that is the same text.
void check_round_trip(const sf::train::Config& config, const std::string& path) {
  const std::string text = sf::train::to_toml(config);
  sf::fuzz::write_file(path, text);
  sf::train::Config back;
  try {
    back = sf::train::load_config(path);
  } catch (const std::exception& e) {
    broken(std::string("the effective config of a valid config does not load: ") + e.what() + "\n" + text);
  }
  if (!(back == config)) broken("the effective config loads as a different Config:\n" + text);
  if (sf::train::to_toml(back) != text) broken("to_toml is not stable across a round trip:\n" + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sf::fuzz::ScratchDir dir;
  static const std::string input_path = dir.file("input.toml");
  static const std::string effective_path = dir.file("effective.toml");

  const sf::fuzz::ConfigInput input = sf::fuzz::split_config({reinterpret_cast<const char*>(data), size});
  sf::fuzz::write_file(input_path, input.file);
  sf::train::Config config;
  try {
    config = sf::train::load_config(input_path, input.overrides);
  } catch (const std::exception& e) {
    sf::fuzz::trace("fuzz_config", std::string("rejected: ") + e.what());
    return 0;  // a clean, documented rejection
  }
  sf::fuzz::trace("fuzz_config", "accepted");
  check_round_trip(config, effective_path);
  return 0;
}
