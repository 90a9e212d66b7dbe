#include "train/training_data.h"

#include "data/corpus.h"

namespace sf::train {

EncodedSplit load_split(const std::string& src_path, const std::string& tgt_path, const data::Tokenizers& tok,
                        std::int64_t max_tokens, const char* name, Progress& progress) {
  data::ParallelCorpus corpus = data::read_parallel(src_path, tgt_path);
  // lines far too long are dropped before tokenising (a 10 MB line would take GBs to tokenise)
  const std::int64_t overlong = data::drop_overlong_pairs(corpus, max_tokens);
  EncodedSplit s;
  s.src = tok.src.encode_all(corpus.src);
  s.tgt = tok.tgt.encode_all(corpus.tgt);
  data::FilterReport report = data::filter_pairs(corpus, s.src, s.tgt, max_tokens);
  report.too_long += overlong;
  progress.line(std::string(name) + ": " + report.summary(max_tokens));
  if (report.kept == 0)
    throw data::CorpusError(std::string(name) + " corpus " + src_path + ": no sentence pair is left after filtering");
  s.src_text = std::move(corpus.src);
  s.tgt_text = std::move(corpus.tgt);
  return s;
}

void truncate_split(EncodedSplit& s, std::int64_t n) {
  if (n <= 0 || static_cast<std::int64_t>(s.src.size()) <= n) return;
  const auto k = static_cast<std::size_t>(n);
  s.src.resize(k), s.tgt.resize(k), s.src_text.resize(k), s.tgt_text.resize(k);
}

}  // namespace sf::train
