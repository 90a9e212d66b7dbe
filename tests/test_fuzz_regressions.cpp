// Fuzz regressions: inputs that once crashed a fuzz target (tests/fuzz/, run by
// tools/run_fuzzers.sh), replayed exactly as the fuzzer ran them (tests/fuzz/fuzz_inputs.h). Each
// must now be rejected with the reader's documented exception, never a crash or a sanitizer report
// (run these under the asan preset too).
//
// The inputs are files in tests/data/fuzz-regressions/<target>/, named for what they are:
//   safetensors/zero-size-shape-stride-overflow
//       shape [0, 2^32, 2^32] with data_offsets [0, 0]: zero bytes, so it passed the byte-count
//       check, but the contiguous strides 2^32 * 2^32 overflow int64 (UB in contiguous_strides)
//   config/literal-key-invalid-utf8, config/multiline-literal-string-invalid-utf8,
//   config/override-literal-string-invalid-utf8
//       a byte that is not UTF-8 inside a '...' or '''...''' string, in the file or in a --set
//       value: toml11 3.7 reports it with an iterator into another buffer (heap overflow read)
//   config/nested-arrays-30000-deep
//       a = [[[[...: toml11 parses arrays recursively and overflows the stack
//
// To add one: minimise the crashing input (see tools/run_fuzzers.sh), copy it into the target's
// folder with a name that says what it is, and describe it above.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/fuzz_inputs.h"
#include "test_util.h"
#include "train/config.h"
#include "train/checkpoint/safetensors.h"

namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(SCRATCHFORMER_TEST_DATA) / "fuzz-regressions";

// The saved inputs of one fuzz target, sorted by name.
std::vector<fs::path> saved_inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(kRegressions / target))
    if (entry.is_regular_file()) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

using sf::test::read_file;  // tests/test_util.h

}  // namespace

TEST_CASE("fuzz regressions: damaged safetensors files throw CheckpointError", "[fuzz][errors]") {
  const std::vector<fs::path> inputs = saved_inputs("safetensors");
  REQUIRE_FALSE(inputs.empty());
  for (const fs::path& input : inputs) {
    INFO("input: " << input.filename().string());
    CHECK_THROWS_AS(sf::train::load_safetensors(input.string()), sf::train::CheckpointError);
  }
}

TEST_CASE("fuzz regressions: bad config files and overrides throw ConfigError", "[fuzz][errors]") {
  const std::vector<fs::path> inputs = saved_inputs("config");
  REQUIRE_FALSE(inputs.empty());
  const sf::fuzz::ScratchDir dir;
  const std::string config_path = dir.file("config.toml");
  for (const fs::path& input : inputs) {
    INFO("input: " << input.filename().string());
    // As fuzz_config does: "#set " lines become overrides, the rest is the file.
    const sf::fuzz::ConfigInput config = sf::fuzz::split_config(read_file(input));
    sf::fuzz::write_file(config_path, config.file);
    CHECK_THROWS_AS(sf::train::load_config(config_path, config.overrides), sf::train::ConfigError);
  }
}
