// Checkpoint helpers shared by the tests that damage, edit or rewrite real checkpoints
// (test_bad_inputs.cpp, test_checkpoint_format.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "run_util.h"
#include "train/checkpoint/safetensors.h"

namespace sf::test {

// A trained run of the small reverse task in `tmp`/run: config.toml, spm.model,
// checkpoint-last and checkpoint-best after 4 steps.
inline std::string trained_run(const TempDir& tmp) {
  const std::string run = tmp / "run";
  const CliResult r =
      run_cli(train_args(small_reverse_run(tmp, run, {"train.max_steps=4", "train.valid_every=2"})), tmp);
  INFO("training stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  return run;
}

// The 8-byte little-endian header length of a safetensors file's bytes.
inline std::uint64_t header_length(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return n;
}

inline std::string with_header_length(std::string bytes, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return bytes;
}

// A copy of the checkpoint at `from` saved to `to` (a valid file, fresh checksum) after `edit`
// changed its tensors or metadata.
inline void save_edited(const std::string& from, const std::string& to,
                 const std::function<void(std::vector<std::pair<std::string, Tensor>>&, std::map<std::string, std::string>&)>& edit) {
  train::SafetensorsFile f = train::load_safetensors(from);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& name : f.order) tensors.emplace_back(name, f.tensors.at(name));
  edit(tensors, f.metadata);
  train::save_safetensors(to, tensors, f.metadata);
}

}  // namespace sf::test
