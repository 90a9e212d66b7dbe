// Picking beam search's length penalty on the valid set (see beam_tuning.h).
#include "train/checkpoint/beam_tuning.h"

#include <cstdio>
#include <stdexcept>

#include "train/checkpoint/checkpoint.h"
#include "train/eval/chrf.h"
#include "train/eval/evaluate.h"
#include "train/checkpoint/safetensors.h"
#include "train/training_data.h"

namespace sf::train {
namespace {

void check_tuning_arguments(const InferenceModel& im, std::int64_t beam, const std::vector<double>& alphas) {
  if (im.config.data.task != "translation")
    throw std::invalid_argument("tune-beam: expected a translation model, got data.task = \"" + im.config.data.task + "\"");
  if (beam < 2)
    throw std::invalid_argument("tune-beam: expected --beam >= 2 (greedy decoding has no length penalty), got " +
                                std::to_string(beam));
  if (alphas.empty()) throw std::invalid_argument("tune-beam: expected at least one length penalty, got none");
  for (double a : alphas)
    if (!(a >= 0 && a <= 5))
      throw std::invalid_argument("tune-beam: expected length penalties in [0, 5], got " + std::to_string(a));
}

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, x);
  return buf;
}

// "beam 4 on 1014 valid sentences: 0.0 35.10, 0.2 35.52, ..."
std::string sweep_summary(const BeamTuning& t) {
  std::string out = "beam " + std::to_string(t.beam) + " on " + std::to_string(t.sentences) + " valid sentences:";
  for (std::size_t i = 0; i < t.scores.size(); ++i)
    out += (i ? ", " : " ") + fixed(t.scores[i].alpha, 2) + " " + fixed(t.scores[i].bleu.score, 2);
  return out;
}

}  // namespace

std::vector<double> default_length_penalties() {
  std::vector<double> out;
  for (int i = 0; i <= 10; ++i) out.push_back(0.2 * i);
  return out;
}

BeamTuning tune_length_penalty(InferenceModel& im, std::int64_t beam, const std::vector<double>& alphas,
                               std::int64_t max_sentences, Progress& progress) {
  check_tuning_arguments(im, beam, alphas);
  EncodedSplit valid = load_task_split(im.config, *im.tokenizers, "valid", progress);
  truncate_split(valid, max_sentences);
  BeamTuning t;
  t.beam = beam;
  t.sentences = static_cast<std::int64_t>(valid.src.size());
  for (double alpha : alphas) {
    DecodeOptions options;
    options.beam = beam;
    options.length_penalty = alpha;
    std::vector<std::string> hyps;
    PenaltyScore s;
    s.alpha = alpha;
    s.bleu = evaluate_bleu(*im.model, *im.tokenizers, valid.src, valid.tgt_text, options, im.config.data.bleu_tokenize,
                           &hyps);
    s.chrf = corpus_chrf(hyps, valid.tgt_text).score;
    progress.line("tune-beam: alpha " + fixed(alpha, 2) + ": valid BLEU " + fixed(s.bleu.score, 2) + ", chrF2 " +
                  fixed(s.chrf, 2));
    if (t.scores.empty() || s.bleu.score > t.scores[t.best].bleu.score) t.best = t.scores.size();
    t.scores.push_back(s);
  }
  return t;
}

void record_beam_choice(const std::string& checkpoint, const BeamTuning& tuning) {
  SafetensorsFile file = load_safetensors(checkpoint);
  Config config = config_from_string(metadata_value(file.metadata, "config", checkpoint), checkpoint);
  config.train.valid_beam = tuning.beam;
  config.train.valid_length_penalty = tuning.scores.at(tuning.best).alpha;
  file.metadata["config"] = to_toml(config);
  file.metadata["length_penalty_sweep"] = sweep_summary(tuning);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : file.order) tensors.emplace_back(name, file.tensors.at(name));
  save_safetensors(checkpoint, tensors, std::move(file.metadata));
}

std::string describe_choice(const BeamTuning& t) {
  return "train.valid_beam = " + std::to_string(t.beam) +
         ", train.valid_length_penalty = " + fixed(t.scores.at(t.best).alpha, 2);
}

std::string format_tuning(const BeamTuning& t, bool zh) {
  std::string out = zh ? "束宽 " + std::to_string(t.beam) + "，验证集 " + std::to_string(t.sentences) + " 句\n"
                       : "beam " + std::to_string(t.beam) + ", " + std::to_string(t.sentences) + " valid sentences\n";
  out += zh ? "alpha   BLEU    chrF2   译文/参考长度\n" : "alpha   BLEU    chrF2   hyp/ref length\n";
  for (std::size_t i = 0; i < t.scores.size(); ++i) {
    const PenaltyScore& s = t.scores[i];
    const double ratio = s.bleu.ref_len > 0 ? static_cast<double>(s.bleu.sys_len) / static_cast<double>(s.bleu.ref_len) : 0;
    out += fixed(s.alpha, 2) + "    " + fixed(s.bleu.score, 2) + "   " + fixed(s.chrf, 2) + "   " + fixed(ratio, 3) +
           (i == t.best ? (zh ? "   <- 选中" : "   <- chosen") : "") + "\n";
  }
  return out;
}

}  // namespace sf::train
