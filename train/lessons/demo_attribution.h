// Demo `attribution`: attention weights are not automatically an explanation. Each method of
// train/classroom/attribution.h names, for every target token, the source token it credits
// most; the demo scores how often that is the truly aligned one:
//   - on the reverse task (target t reads source S-1-t: the alignment is known exactly), with a
//     small Transformer (2 + 2 layers, 4 heads) trained for it here;
//   - on a trained translator (`--checkpoint`, a Multi30k de-en run), against the word
//     alignment of 12 test sentences annotated by hand (data/corpora/multi30k-alignments): a
//     target piece counts when its word has a link; it is a hit when the credited source piece
//     belongs to a linked source word.
// Head ablation does not point at tokens: it ranks the heads by how much the target tokens'
// log-probability drops without each; the demo prints that ranking beside each head's agreement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/lessons/demo_report.h"

namespace sf::lessons {

using Matrix = std::vector<std::vector<double>>;

struct AttributionSetting {
  std::string name;                  // "reverse task" or the checkpoint's file name
  std::int64_t sentences = 0, counted = 0;  // target tokens scored
  std::vector<std::string> methods;  // "attention, best head", "attention, head mean", "rollout", ...
  std::vector<double> agreement;     // [method]: share of the counted target tokens that were hits
  std::vector<std::string> heads;    // "L1 H2" (decoder layer, cross-attention head, from 1)
  std::vector<double> head_agreement;   // [head]: that head's attention alone
  std::vector<double> head_importance;  // [head]: mean drop of log p(y_t) when it is zeroed
  // the first sentence, for the figures: its tokens, the truth (1 = aligned) and each method's map
  std::vector<std::string> source, target;
  Matrix truth;
  std::vector<std::pair<std::string, Matrix>> maps;
};

struct AttributionDemoResult {
  AttributionSetting reverse;
  std::optional<AttributionSetting> translator;  // with a checkpoint
  double reverse_loss = 0;                       // the toy model's final training loss
  std::vector<std::pair<std::string, bool>> claims;
  bool claim_holds = false;
};

// The reverse model's training steps (the demo's; a test of the plumbing may pass fewer).
inline constexpr std::int64_t kAttributionSteps = 800;

// checkpoint: a trained encoder-decoder de-en run's checkpoint, or "" (the reverse task only).
AttributionDemoResult compute_attribution_demo(std::uint64_t seed, const std::string& checkpoint, const std::string& corpora,
                                               std::int64_t steps = kAttributionSteps);

// The hand alignments: line number, German, English, links (German word i, English word j).
struct AlignedPair {
  std::int64_t line = 0;
  std::string de, en;
  std::vector<std::pair<std::int64_t, std::int64_t>> links;
};
// Reads data/corpora/multi30k-alignments/multi30k-test.tsv under `corpora` ("" = shipped);
// throws std::runtime_error naming the file and line for a malformed line.
std::vector<AlignedPair> read_alignments(const std::string& corpora);

Json attribution_json(const AttributionDemoResult& r);

}  // namespace sf::lessons
