// What a training run tells the world: the terminal (a progress bar on a TTY, plain lines
// otherwise) and metrics.tsv (one row per log, validation or test event, with a header).
// In data-parallel training only rank 0 writes either.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace sf::train {

// "42s", "3m07s", "1h05m"; "?" for a negative or non-finite number of seconds.
std::string format_duration(double seconds);

// Opens a tab-separated log (metrics.tsv, layer_norms.tsv) to append rows, writing `header` and a
// newline first when the file is new or empty. Throws std::runtime_error when it cannot be opened.
std::ofstream open_table_for_append(const std::filesystem::path& path, const char* header);

// metrics.tsv: one row per log or validation event.
class MetricsFile {
 public:
  static constexpr const char* kHeader =
      "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\tallreduce_share\taccuracy";
  // Appends to `path` (writing the header into a new or empty file). enabled false (ranks other
  // than 0 in data-parallel training): writes nothing.
  explicit MetricsFile(const std::filesystem::path& path, bool enabled = true);
  // One row; NaN fields are left empty. ppl is exp(nll). allreduce_share (data-parallel): the
  // share of the wall time spent in the gradient allreduce. accuracy (mlm, classify): the share
  // of correct predictions in validation and test.
  void row(std::int64_t step, std::int64_t epoch, const char* kind, double loss, double nll, double lr,
           double tokens_per_s, double grad_norm, double bleu, double elapsed, double allreduce_share = NAN,
           double accuracy = NAN);

 private:
  std::ofstream out_;
};

// The terminal: a progress bar rewritten in place on a TTY; lines everywhere.
class Progress {
 public:
  Progress();
  // A Progress that prints nothing: for work done on behalf of a server (the explorer loading a
  // batch for a page), whose console is not the user's.
  static Progress silent();
  bool tty() const { return tty_; }
  void bar(const std::string& line);   // on a TTY only; rank 0 only
  void line(const std::string& text);  // a line of its own (clears the bar first); rank 0 only

 private:
  bool tty_;
  bool open_ = false;
  bool silent_ = false;
};

}  // namespace sf::train
