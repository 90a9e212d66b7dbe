// Translating with a trained checkpoint from a program of one's own: what
// `scratchformer translate --checkpoint FILE --beam 1` does, through the same library calls.
//
//   train::load_inference_model   the checkpoint's config and weights (train/checkpoint/) and the
//                                 tokenizer saved beside it (spm.model in the run directory),
//                                 built into the model its config names, in eval mode
//   train::require_model          refuses a checkpoint trained for another task, in one line
//   Tokenizer::encode             one line of text -> source token ids (no <s>, no </s>)
//   train::translate_all          ids -> translations; with beam = 1 each batch is decoded by
//                                 greedy_decode (train/eval/decode.h): one token per step, the
//                                 most likely one, until </s> or the length limit
//
// Usage: translate CHECKPOINT [SENTENCE]    without SENTENCE, one sentence per line from stdin.
// A bad checkpoint (missing, unreadable, no tokenizer beside it) is one line on stderr, exit 2.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/runtime/threads.h"  // init_threads
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"
#include "train/task.h"  // require_model

using namespace sf;

// The sentence given on the command line, or else every line of stdin (a "\r" before "\n" dropped).
std::vector<std::string> read_sentences(int argc, char** argv) {
  if (argc > 2) return {argv[2]};
  std::vector<std::string> lines;
  for (std::string line; std::getline(std::cin, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// One line of output per input line: empty lines stay empty, the others are decoded together.
std::vector<std::string> translate_lines(const train::InferenceModel& im, const std::vector<std::string>& lines) {
  std::vector<std::vector<std::int64_t>> sources;  // token ids of the non-empty lines
  std::vector<std::size_t> where;                   // their line numbers
  const auto max_tokens = static_cast<std::size_t>(train::max_source_tokens(im));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::int64_t> ids = im.tokenizers->src.encode(lines[i]);
    if (ids.empty()) continue;
    ids.resize(std::min(ids.size(), max_tokens));  // positions beyond max_len do not exist
    sources.push_back(ids), where.push_back(i);
  }
  train::DecodeOptions greedy;
  greedy.beam = 1;
  const std::vector<std::string> hyps = train::translate_all(*im.model, *im.tokenizers, sources, greedy);
  std::vector<std::string> out(lines.size());
  for (std::size_t k = 0; k < where.size(); ++k) out[where[k]] = hyps[k];
  return out;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: " << argv[0] << " CHECKPOINT [SENTENCE]   (no SENTENCE: one per line from stdin)\n";
    return 2;
  }
  init_threads();  // the thread count and memory reuse the scratchformer program sets up too
  try {
    const train::InferenceModel im = train::load_inference_model(argv[1]);
    train::require_model(im.config, argv[1], "translate", im.config.data.task == "translation",
                         "a model trained with data.task = \"translation\"");
    std::cerr << "loaded " << argv[1] << ": " << im.config.model.arch << ", step " << im.step << "\n";
    for (const std::string& hyp : translate_lines(im, read_sentences(argc, argv))) std::cout << hyp << "\n";
  } catch (const std::exception& e) {
    std::cerr << "translate: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
