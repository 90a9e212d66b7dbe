// libFuzzer target: train/checkpoint/safetensors.h load_safetensors() on arbitrary bytes.
//
// A damaged checkpoint must give a CheckpointError (or another std::exception), never a crash, a
// sanitizer report, a hang, a leak or an allocation larger than the file. Beyond "does not
// crash", a file that loads is checked against what the header promises:
//   - the tensors, concatenated in `order`, are exactly the file's data section (they tile it);
//   - every tensor is contiguous and does not require grad; `order` names each tensor once;
//   - saving what was loaded and loading it again gives the same names, order, metadata (the
//     checksum aside, which save recomputes), dtypes, shapes and bytes.
// A broken promise aborts with a message, which libFuzzer reports as a crash like any other.
//
// Run: tools/run_fuzzers.sh, or by hand:
//   build/fuzz/fuzz_safetensors -dict=tests/fuzz/safetensors.dict -max_len=4096 tests/fuzz/corpus/safetensors
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_inputs.h"
#include "train/checkpoint/safetensors.h"

namespace {

using sf::Tensor;
using sf::train::SafetensorsFile;

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what.c_str());
  std::abort();
}

std::size_t byte_count(const Tensor& t) { return static_cast<std::size_t>(t.numel()) * sf::dtype_size(t.dtype()); }

// The tensors in `order`, back to back: what the data section must be.
std::string data_section(const SafetensorsFile& f) {
  std::string out;
  for (const std::string& name : f.order) {
    const Tensor& t = f.tensors.at(name);
    out.append(static_cast<const char*>(t.raw_data()), byte_count(t));
  }
  return out;
}

// A successful load of `input` must describe it exactly (see the top of the file).
void check_loaded(const SafetensorsFile& f, std::string_view input) {
  if (f.order.size() != f.tensors.size())
    broken("order lists " + std::to_string(f.order.size()) + " names for " + std::to_string(f.tensors.size()) +
           " tensors");
  for (const std::string& name : f.order) {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) broken("order names \"" + name + "\", which is not among the tensors");
    if (!it->second.is_contiguous()) broken("tensor \"" + name + "\" is not contiguous");
    if (it->second.requires_grad()) broken("tensor \"" + name + "\" requires grad");
  }
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, input.data(), sizeof header_len);  // the load succeeded: >= 8 bytes
  const std::string_view expected = input.substr(8 + header_len);
  if (data_section(f) != expected)
    broken("the loaded tensors (" + std::to_string(data_section(f).size()) + " bytes) differ from the data section (" +
           std::to_string(expected.size()) + " bytes)");
}

// save(load(file)) then load again must give back the same checkpoint.
void check_round_trip(const SafetensorsFile& f, const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : f.order) tensors.emplace_back(name, f.tensors.at(name));
  SafetensorsFile back;
  try {
    sf::train::save_safetensors(path, tensors, f.metadata);
    back = sf::train::load_safetensors(path);
  } catch (const std::exception& e) {
    broken(std::string("a checkpoint that loads cannot be saved and loaded again: ") + e.what());
  }
  if (back.order != f.order) broken("the round trip changed the tensor order");
  auto without_checksum = [](std::map<std::string, std::string> m) {
    m.erase(sf::train::kChecksumKey);
    return m;
  };
  if (without_checksum(back.metadata) != without_checksum(f.metadata)) broken("the round trip changed the metadata");
  for (const std::string& name : f.order) {
    const Tensor& a = f.tensors.at(name);
    const Tensor& b = back.tensors.at(name);
    if (a.dtype() != b.dtype() || a.shape() != b.shape() ||
        std::memcmp(a.raw_data(), b.raw_data(), byte_count(a)) != 0)
      broken("the round trip changed tensor \"" + name + "\"");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sf::fuzz::ScratchDir dir;
  static const std::string input_path = dir.file("input.safetensors");
  static const std::string saved_path = dir.file("saved.safetensors");

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  sf::fuzz::write_file(input_path, input);
  SafetensorsFile loaded;
  try {
    loaded = sf::train::load_safetensors(input_path);
  } catch (const std::exception& e) {
    sf::fuzz::trace("fuzz_safetensors", std::string("rejected: ") + e.what());
    return 0;  // a clean, documented rejection
  }
  sf::fuzz::trace("fuzz_safetensors", "accepted");
  check_loaded(loaded, input);
  check_round_trip(loaded, saved_path);
  return 0;
}
