// Beam search's length penalty, picked on the valid set and recorded in the run's config, so that
// the test score is never tuned on the test set (`scratchformer tune-beam`).
//
// Beam search ranks finished hypotheses by  score / length^alpha  (train/eval/decode.h): alpha = 0
// prefers short outputs (every token lowers the log-probability), larger alpha longer ones. The
// best alpha depends on the model and the language pair, so it is a hyper-parameter like any
// other: chosen on held-out data the model was not trained on (the valid split of its config),
// then used unchanged on test.
//
//   scratchformer tune-beam --checkpoint runs/x/checkpoint-best.safetensors --beam 4
//   alpha  BLEU   chrF2                (one row per alpha, the chosen one marked)
//   ...
//   recorded train.valid_beam = 4, train.valid_length_penalty = 1.2 in runs/x/checkpoint-best.safetensors
//
// After it, `translate` and `eval` on that checkpoint use beam 4 and alpha 1.2 unless told otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/eval/bleu.h"
#include "train/run_log.h"
#include "train/setup.h"

namespace sf::train {

// One alpha's result on the valid split.
struct PenaltyScore {
  double alpha = 0;
  BleuResult bleu;  // corpus BLEU with the config's data.bleu_tokenize
  double chrf = 0;  // sacreBLEU's chrF2
};

struct BeamTuning {
  std::int64_t beam = 4;
  std::int64_t sentences = 0;        // valid sentences translated per alpha
  std::vector<PenaltyScore> scores;  // in the order the alphas were given
  std::size_t best = 0;              // index of the highest BLEU (the first of equals)
};

// The default alphas tried: 0.0, 0.2, ..., 2.0.
std::vector<double> default_length_penalties();

// Translates the valid split of the model's config (the first `max_sentences`, 0 = all; the same
// pairs validation uses) with beam `beam` and each alpha, and scores each with BLEU and chrF.
// std::invalid_argument for a model that does not translate, beam < 2 (greedy has no length
// penalty), no alpha or an alpha outside [0, 5].
BeamTuning tune_length_penalty(InferenceModel& im, std::int64_t beam, const std::vector<double>& alphas,
                               std::int64_t max_sentences, Progress& progress);

// Rewrites `checkpoint` (atomically, weights and state unchanged) with train.valid_beam and
// train.valid_length_penalty of its config set to the choice, and the metadata key
// "length_penalty_sweep" holding every alpha's valid BLEU ("beam 4 on 1014 valid sentences:
// 0.6 37.12, 0.8 37.40, ...").
void record_beam_choice(const std::string& checkpoint, const BeamTuning& tuning);

// "train.valid_beam = 4, train.valid_length_penalty = 1.2"
std::string describe_choice(const BeamTuning& tuning);

// The table tune-beam prints: a header, one row per alpha (alpha, BLEU, chrF2, hypothesis/reference
// length ratio), the chosen row marked; headings in Chinese with zh.
std::string format_tuning(const BeamTuning& tuning, bool zh);

}  // namespace sf::train
