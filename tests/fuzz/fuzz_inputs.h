// How one fuzz input (a string of bytes) becomes the arguments of the reader under test.
//
// Shared by the libFuzzer targets in this folder and by tests/test_fuzz_regressions.cpp, so a
// crashing input saved under tests/data/fuzz-regressions/<target>/ is replayed exactly as the
// fuzzer ran it:
//
//   safetensors  the input is the whole .safetensors file
//   config       the input is the TOML file, except that each line starting with "#set " is
//                taken out of it and passed to load_config as a --set override instead, in order:
//                "#set train.lr=0.5" -> override "train.lr=0.5" (so an override may hold bytes the
//                file could not, and a seed still reads as a config file with comments)
//   corpus       the input is the source file, then one 0xFF byte, then the target file (0xFF never
//                occurs in UTF-8, so the split is unambiguous); without a 0xFF byte both files hold
//                the whole input
//
// With SF_FUZZ_TRACE set in the environment, each target prints every input's outcome to stderr
// ("accepted", or the exception's message): to check the seeds, and to see what a crashing input
// is rejected with once it is fixed:
//   SF_FUZZ_TRACE=1 build/fuzz/fuzz_config tests/fuzz/corpus/config/*
//
// Header-only, no dependencies beyond the standard library and POSIX.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sf::fuzz {

// fuzz_config: the config file's text and the --set overrides.
struct ConfigInput {
  std::string file;                    // the input without its "#set " lines
  std::vector<std::string> overrides;  // those lines without "#set ", in order
};

inline ConfigInput split_config(std::string_view input) {
  constexpr std::string_view kMarker = "#set ";
  ConfigInput out;
  while (!input.empty()) {
    const std::size_t end = input.find('\n');
    const std::string_view line = input.substr(0, end);
    const std::string_view with_newline = input.substr(0, end == std::string_view::npos ? input.size() : end + 1);
    if (line.substr(0, kMarker.size()) == kMarker) out.overrides.emplace_back(line.substr(kMarker.size()));
    else out.file += with_newline;
    input.remove_prefix(with_newline.size());
  }
  return out;
}

// fuzz_corpus: the source and target file contents.
struct ParallelText {
  std::string_view src, tgt;
};

inline ParallelText split_parallel(std::string_view input) {
  const std::size_t sep = input.find('\xff');
  if (sep == std::string_view::npos) return {input, input};
  return {input.substr(0, sep), input.substr(sep + 1)};
}

// Prints one input's outcome when SF_FUZZ_TRACE is set (see the top of the file).
inline void trace(const char* target, const std::string& outcome) {
  static const bool on = std::getenv("SF_FUZZ_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "%s: %s\n", target, outcome.c_str());
}

// Writes `bytes` to `path`, replacing it. A failure here is the machine's, not the reader's:
// it aborts with the reason rather than letting the fuzzer blame the code under test.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) ||
      std::fclose(f) != 0) {
    std::perror(("fuzz: cannot write " + path).c_str());
    std::abort();
  }
}

// A scratch folder owned by this process (so parallel fuzzing jobs never share a file), in
// /dev/shm when it is usable (a RAM file system: no disk I/O per input), else in the system temp
// directory; removed with its files when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    std::error_code ec;
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) base = std::filesystem::temp_directory_path(ec).string();
    if (base.empty()) base = "/tmp";
    std::string pattern = base + "/sf-fuzz-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::perror(("fuzz: cannot create a folder like " + pattern).c_str());
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // The path of `name` inside the folder (the same path every call: files are reused per input).
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace sf::fuzz
