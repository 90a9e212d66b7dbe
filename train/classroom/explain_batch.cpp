// `scratchformer explain-batch` (explain_batch.h): loads one batch as the trainer would draw it,
// then prints it piece by piece: header, rows, padding masks, causal mask, counts.
//
// Letters: B batch rows, S source length, T target length (+1 for BOS / EOS).
#include "train/classroom/explain_batch.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "autograd/tensor.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "train/run_log.h"
#include "train/setup.h"
#include "train/task.h"
#include "train/training_data.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

// ---- text in columns ----------------------------------------------------------------------

std::string pad_to(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

// Lines of labelled cells aligned in columns, wrapped so no line is much wider than `max_width`:
//   label    cell0  cell1  ...
struct ColumnBlock {
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> cells;  // cells[line][column]; shorter lines leave blanks

  std::string render(const std::string& indent, std::size_t max_width) const {
    std::size_t label_w = 0, columns = 0;
    for (const auto& l : labels) label_w = std::max(label_w, display_width(l));
    for (const auto& line : cells) columns = std::max(columns, line.size());
    std::vector<std::size_t> col_w(columns, 1);
    for (const auto& line : cells)
      for (std::size_t c = 0; c < line.size(); ++c) col_w[c] = std::max(col_w[c], display_width(line[c]));
    std::ostringstream os;
    std::size_t start = 0;
    while (start < columns) {
      std::size_t end = start, width = indent.size() + label_w + 2;
      while (end < columns && (end == start || width + col_w[end] + 2 <= max_width)) width += col_w[end++] + 2;
      if (start > 0) os << "\n";
      for (std::size_t l = 0; l < labels.size(); ++l) {
        std::string row = indent + pad_to(labels[l], label_w + 2);
        for (std::size_t c = start; c < end; ++c)
          row += pad_to(c < cells[l].size() ? cells[l][c] : "", col_w[c] + 2);
        while (!row.empty() && row.back() == ' ') row.pop_back();
        os << row << "\n";
      }
      start = end;
    }
    return os.str();
  }
};

constexpr std::size_t kLineWidth = 110;  // ColumnBlock lines wrap before this many columns

std::vector<std::string> row_ids_as_pieces(const data::Tokenizer& tok, const Tensor& ids, std::int64_t b) {
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < ids.size(1); ++i) out.push_back(tok.id_to_piece(static_cast<std::int64_t>(ids.at({b, i}))));
  return out;
}

std::vector<std::string> mask_row(const Tensor& mask, std::int64_t b) {  // mask: (B,1,1,L) bool
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < mask.size(3); ++i) out.push_back(mask.at({b, 0, 0, i}) != 0 ? "1" : "0");
  return out;
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::string percent(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

// ---- the batch ----------------------------------------------------------------------------

// The run's tokenizers: run.dir's own if it has them. Otherwise trained into run.dir with
// --keep-tokenizer (said on `log`; `train` reuses them), or else outside the project, in the
// tokenizer cache (train/setup.h), so that explaining a batch writes nothing into the repository.
Tokenizers tokenizers_for(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  const auto seed = static_cast<std::uint64_t>(cfg.train.seed);
  if (!opt.keep_tokenizer) return load_or_train_tokenizers_outside_run(cfg, seed, log);
  if (!tokenizers_exist(cfg, cfg.run.dir))
    log << "scratchformer: no tokenizer in " << cfg.run.dir << " yet; training one on the training corpus (as `train` "
           "would) into it (--keep-tokenizer)\n";
  return load_or_train_tokenizers(cfg, seed);
}

// One batch of the training corpus as the trainer draws it, with what it takes to explain it.
struct LoadedBatch {
  Tokenizers tok;
  data::ParallelCorpus corpus;  // the training split after filtering: batch.indices point into it
  data::FilterReport report{};
  std::int64_t batches_per_epoch = 0;
  data::Batch batch{};
};

// The tokenizers (tokenizers_for: said on `log` when they are not run.dir's), the training
// split read, encoded and filtered exactly as the trainer does, and batch opt.batch of epoch 0
// from the trainer's Batcher (same seed, same budget).
LoadedBatch load_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  if (opt.batch < 0) throw std::invalid_argument("explain-batch: --batch must be >= 0, got " + std::to_string(opt.batch));
  LoadedBatch r{.tok = tokenizers_for(cfg, opt, log),
                .corpus = data::read_parallel(cfg.data.train_src, cfg.data.train_tgt)};
  std::vector<std::vector<std::int64_t>> src = r.tok.src.encode_all(r.corpus.src), tgt = r.tok.tgt.encode_all(r.corpus.tgt);
  r.report = data::filter_pairs(r.corpus, src, tgt, cfg.data.max_tokens);
  data::Batcher batcher(src, tgt, cfg.data.batch_tokens, static_cast<std::uint64_t>(cfg.train.seed), true);
  const std::int64_t K = r.batches_per_epoch = batcher.batches_per_epoch();
  if (opt.batch >= K)
    throw std::invalid_argument("explain-batch: --batch " + std::to_string(opt.batch) + " is past the end: epoch 0 has " +
                                std::to_string(K) + " batches (0.." + std::to_string(K - 1) + ")");
  for (std::int64_t k = 0; k <= opt.batch; ++k) batcher.next(r.batch);
  return r;
}

// ---- the printout, part by part -----------------------------------------------------------

// Which batch this is, of which corpus and step; the shapes; what teacher forcing means.
void print_header(std::ostream& os, const Config& cfg, const ExplainOptions& opt, const LoadedBatch& lb) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows(), S = batch.src.size(1), T = batch.tgt_in.size(1);
  os << "batch " << opt.batch << " of " << lb.batches_per_epoch << " in epoch 0 of " << cfg.source_path << " (seed "
     << cfg.train.seed << ", batch_tokens " << cfg.data.batch_tokens << ")";
  if (cfg.train.accum_steps == 1)
    os << ": what training step " << opt.batch + 1 << " learns from\n";
  else
    os << ": part of training step " << opt.batch / cfg.train.accum_steps + 1 << " (accum_steps " << cfg.train.accum_steps
       << ")\n";
  os << "training corpus: " << lb.report.summary(cfg.data.max_tokens) << "; tokenizer " << lb.tok.src.model_path()
     << " (vocabulary " << lb.tok.src.vocab_size() << ")\n";
  os << "shapes: src (" << B << ", " << S << "), tgt_in and tgt_out (" << B << ", " << T << "), src padding mask (" << B
     << ", 1, 1, " << S << "), causal mask (" << T << ", " << T << ")\n\n";

  os << "Teacher forcing: tgt_in is the target shifted right by one, starting with <s>; tgt_out is the target\n"
        "followed by </s>. Position t of the decoder reads tgt_in[0..t] (the causal mask hides the rest) and\n"
        "is trained to predict tgt_out[t], which is tgt_in[t+1]: the true previous token, not the model's guess.\n"
        "Padding (<pad>, mask 1) fills the rows up to the longest one; attention and the loss ignore it.\n";
}

// Row b: its sentence pair, then its tokens and masks in columns, one per position.
void print_row(std::ostream& os, const LoadedBatch& lb, std::int64_t b) {
  const data::Batch& batch = lb.batch;
  const std::int64_t S = batch.src.size(1), T = batch.tgt_in.size(1);
  const auto index = static_cast<std::size_t>(batch.indices[static_cast<std::size_t>(b)]);
  os << "\nrow " << b << " (training pair " << index << " after filtering): " << in_quotes(lb.corpus.src[index]) << " -> "
     << in_quotes(lb.corpus.tgt[index]) << "\n";
  ColumnBlock block;
  block.labels = {"position", "src", "src padding", "tgt_in", "tgt_out", "tgt padding"};
  std::vector<std::string> positions;
  for (std::int64_t i = 0; i < std::max(S, T); ++i) positions.push_back(std::to_string(i));
  block.cells = {positions,
                 row_ids_as_pieces(lb.tok.src, batch.src, b),
                 mask_row(batch.src_pad_mask, b),
                 row_ids_as_pieces(lb.tok.tgt, batch.tgt_in, b),
                 row_ids_as_pieces(lb.tok.tgt, batch.tgt_out, b),
                 mask_row(batch.tgt_pad_mask, b)};
  os << block.render("  ", kLineWidth);
}

// Row 0's first few positions as the decoder reads them: what it sees, what it must predict.
void print_decoder_reading(std::ostream& os, const LoadedBatch& lb) {
  const data::Batch& batch = lb.batch;
  const std::int64_t T = batch.tgt_in.size(1);
  const std::vector<std::string> in = row_ids_as_pieces(lb.tok.tgt, batch.tgt_in, 0);
  const std::vector<std::string> out = row_ids_as_pieces(lb.tok.tgt, batch.tgt_out, 0);
  os << "  reading row 0 as the decoder does:\n";
  for (std::int64_t t = 0; t < std::min<std::int64_t>(T, 4); ++t) {
    if (out[static_cast<std::size_t>(t)] == lb.tok.tgt.id_to_piece(data::kPadId)) break;
    std::string seen;
    for (std::int64_t j = 0; j <= t; ++j) seen += (j ? " " : "") + in[static_cast<std::size_t>(j)];
    os << "    t=" << t << ": sees " << seen << "  ->  must predict " << out[static_cast<std::size_t>(t)] << "\n";
  }
}

// The first `shown` rows in full, row 0 also as the decoder reads it.
void print_rows(std::ostream& os, const LoadedBatch& lb, std::int64_t shown) {
  for (std::int64_t b = 0; b < shown; ++b) {
    print_row(os, lb, b);
    if (b == 0) print_decoder_reading(os, lb);
  }
  const std::int64_t B = lb.batch.rows();
  if (shown < B) os << "\n(" << B - shown << " more rows; --rows N prints more)\n";
}

// The padding masks as 0/1 strings for the first rows of the batch, and how many rows hold any
// padding.
void print_padding_masks(std::ostream& os, const LoadedBatch& lb, std::int64_t shown) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows();
  constexpr std::int64_t kMaskRows = 8;
  const std::int64_t mask_rows = std::min(B, std::max(kMaskRows, shown));
  os << "\npadding masks of the first " << mask_rows << " rows (1 = padding: blocked as a key, ignored by the loss):\n";
  ColumnBlock masks;
  masks.labels = {"row"};
  masks.cells = {{"src_pad_mask", "tgt_pad_mask"}};
  for (std::int64_t b = 0; b < mask_rows; ++b) {
    std::string src_bits, tgt_bits;
    for (const std::string& v : mask_row(batch.src_pad_mask, b)) src_bits += v;
    for (const std::string& v : mask_row(batch.tgt_pad_mask, b)) tgt_bits += v;
    masks.labels.push_back(std::to_string(b));
    masks.cells.push_back({src_bits, tgt_bits});
  }
  os << masks.render("  ", kLineWidth);
  std::int64_t padded_rows = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto src_bits = mask_row(batch.src_pad_mask, b), tgt_bits = mask_row(batch.tgt_pad_mask, b);
    padded_rows += std::count(src_bits.begin(), src_bits.end(), "1") + std::count(tgt_bits.begin(), tgt_bits.end(), "1") > 0;
  }
  os << "  " << padded_rows << " of the " << B << " rows hold padding";
  if (padded_rows * 4 < B)
    os << " (few: the batcher sorts pairs by length before cutting batches, so a batch holds similar lengths)";
  os << "\n";
}

// The decoder self-attention's causal mask for at most `max_causal` positions.
void print_causal_mask(std::ostream& os, const LoadedBatch& lb, std::int64_t max_causal) {
  const std::int64_t T = lb.batch.tgt_in.size(1);
  const std::int64_t n = std::min(T, std::max<std::int64_t>(max_causal, 1));
  os << "\ncausal mask of the decoder self-attention (1 = blocked: a later position)";
  if (n < T) os << ", the first " << n << " of " << T << " positions";
  os << ";\nrow = query position t, column = key position j, blocked where j > t:\n";
  const Tensor causal = nn::causal_mask(n, n);  // (n,n)
  for (std::int64_t i = 0; i < n; ++i) {
    std::string line = "  ";
    for (std::int64_t j = 0; j < n; ++j) line += causal.at({i, j}) != 0 ? "1" : "0";
    os << line << "\n";
  }
  os << "(the decoder's self-attention blocks a key if it is later OR padding: causal mask | target padding mask)\n";
}

// Rows, real tokens against padding cells, and the token budget the batch fills.
void print_counts(std::ostream& os, const Config& cfg, const LoadedBatch& lb) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows(), S = batch.src.size(1), T = batch.tgt_in.size(1);
  const std::int64_t src_cells = B * S, tgt_cells = B * T, padded = B * std::max(S, T);
  os << "\ncounts:\n"
     << "  rows (sentence pairs)        " << B << "\n"
     << "  source tokens                " << batch.src_tokens << " of " << src_cells << " cells ("
     << percent(src_cells - batch.src_tokens, src_cells) << " padding)\n"
     << "  target predictions (loss)    " << batch.tgt_tokens << " of " << tgt_cells << " cells ("
     << percent(tgt_cells - batch.tgt_tokens, tgt_cells) << " padding): the target tokens plus one </s> per row\n"
     << "  budget                       rows * max(S, T) = " << B << " * " << std::max(S, T) << " = " << padded
     << " of batch_tokens " << cfg.data.batch_tokens << "\n";
}

// ---- the other tasks: decoder-only translation, lm, mlm, classify (train/task.h) -------------

// One batch of a task's training split, drawn as the trainer draws it.
struct TaskBatch {
  Tokenizers tok;
  EncodedSplit split{};
  std::int64_t batches_per_epoch = 0;
  data::Batch batch{};
};

TaskBatch load_task_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  if (opt.batch < 0) throw std::invalid_argument("explain-batch: --batch must be >= 0, got " + std::to_string(opt.batch));
  TaskBatch r{.tok = tokenizers_for(cfg, opt, log)};
  Progress quiet_progress;  // its lines ("train: kept ...") go to stdout like the trainer's
  r.split = load_task_split(cfg, r.tok, "train", quiet_progress);
  const TaskBatches task(cfg, r.tok);
  data::Batcher batcher(r.split.src, r.split.tgt, cfg.data.batch_tokens, static_cast<std::uint64_t>(cfg.train.seed), true,
                        task.rows());
  const std::int64_t K = r.batches_per_epoch = batcher.batches_per_epoch();
  if (opt.batch >= K)
    throw std::invalid_argument("explain-batch: --batch " + std::to_string(opt.batch) + " is past the end: epoch 0 has " +
                                std::to_string(K) + " batches (0.." + std::to_string(K - 1) + ")");
  std::vector<std::int64_t> indices;
  for (std::int64_t k = 0; k <= opt.batch; ++k) batcher.next_indices(indices);
  r.batch = task.make(r.split, indices, /*epoch=*/0);
  return r;
}

// What one row of the task is, in words.
const char* task_explanation(const Config& cfg) {
  if (cfg.data.task == "translation")
    return "Prompted translation (decoder-only): source and target are ONE causal sequence, tgt_in = <s> source <sep>\n"
           "target. tgt_out[t] = tgt_in[t+1] where a target token (or </s>) comes next, and <pad> over the prompt:\n"
           "the source is given, so the loss reads only the target. There is no cross-attention: the target's\n"
           "positions see the source through the same causal self-attention.\n";
  if (cfg.data.task == "lm")
    return "Language modelling (decoder-only): tgt_in = <s> x_1 .. x_n, tgt_out = x_1 .. x_n </s>. Position t reads\n"
           "x_1..x_t (the causal mask hides the rest) and is trained to predict x_{t+1}: h_t = f(x_1..x_t).\n";
  if (cfg.data.task == "mlm")
    return "Masked LM (encoder-only, BERT's recipe): 15% of the ordinary tokens are chosen; of those 80% become\n"
           "<mask>, 10% a random token, 10% stay. src is what the encoder reads; tgt_out holds the original token\n"
           "at the chosen positions and <pad> elsewhere, so the loss reads only them. No causal mask: every\n"
           "position sees every other (padding aside), to the left and to the right.\n";
  return "Classification (encoder-only): src = <cls> text_a [<sep> text_b]; the encoder's outputs are pooled into\n"
         "one vector (model.pooling: the mean over the non-padding tokens, or the <cls> position) and a linear\n"
         "layer scores the classes; tgt_out is the label, one prediction per row.\n";
}

void print_task_row(std::ostream& os, const Config& cfg, const TaskBatch& tb, std::int64_t b) {
  const data::Batch& batch = tb.batch;
  const auto index = static_cast<std::size_t>(batch.indices[static_cast<std::size_t>(b)]);
  os << "\nrow " << b << " (example " << index << "): " << in_quotes(tb.split.src_text[index]);
  if (cfg.data.task == "translation") os << " -> " << in_quotes(tb.split.tgt_text[index]);
  if (cfg.data.task == "classify") os << " -> label " << tb.split.tgt_text[index] << " (class " << tb.split.tgt[index][0] << ")";
  os << "\n";
  ColumnBlock block;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  std::vector<std::string> positions;
  for (std::int64_t i = 0; i < ids.size(1); ++i) positions.push_back(std::to_string(i));
  if (decoder) {
    block.labels = {"position", "tgt_in", "tgt_out", "padding"};
    block.cells = {positions, row_ids_as_pieces(tb.tok.tgt, batch.tgt_in, b), row_ids_as_pieces(tb.tok.tgt, batch.tgt_out, b),
                   mask_row(batch.tgt_pad_mask, b)};
  } else {
    block.labels = {"position", "src", "padding"};
    block.cells = {positions, row_ids_as_pieces(tb.tok.src, batch.src, b), mask_row(batch.src_pad_mask, b)};
    if (cfg.data.task == "mlm") {
      std::vector<std::string> original;
      for (const std::int64_t id : tb.split.src[index]) original.push_back(tb.tok.src.id_to_piece(id));
      block.labels.insert(block.labels.begin() + 1, "original");
      block.cells.insert(block.cells.begin() + 1, original);
      block.labels.push_back("tgt_out");
      block.cells.push_back(row_ids_as_pieces(tb.tok.src, batch.tgt_out, b));
    }
  }
  os << block.render("  ", kLineWidth);
}

void print_task_counts(std::ostream& os, const Config& cfg, const TaskBatch& tb) {
  const data::Batch& batch = tb.batch;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  const std::int64_t B = batch.rows(), L = ids.size(1);
  const char* what = cfg.data.task == "mlm" ? "the chosen (masked) positions"
                     : cfg.data.task == "classify" ? "one label per row"
                     : cfg.data.task == "lm" ? "every token plus one </s> per row"
                                             : "the target tokens plus one </s> per row, not the prompt";
  os << "\ncounts:\n"
     << "  rows                         " << B << "\n"
     << "  predictions (loss)           " << batch.tgt_tokens << ": " << what << "\n"
     << "  budget                       rows * " << (cfg.data.task == "translation" ? "(S + T + 2)" : "length") << " = " << B
     << " * " << L << " = " << B * L << " of batch_tokens " << cfg.data.batch_tokens << "\n";
}

std::string explain_task_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  const TaskBatch tb = load_task_batch(cfg, opt, log);
  const data::Batch& batch = tb.batch;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  std::ostringstream os;
  os << "batch " << opt.batch << " of " << tb.batches_per_epoch << " in epoch 0 of " << cfg.source_path << " (data.task "
     << cfg.data.task << ", model.arch " << cfg.model.arch << ", seed " << cfg.train.seed << ")\n"
     << "shapes: " << (decoder ? "tgt_in and tgt_out (" : "src (") << batch.rows() << ", " << ids.size(1) << ")"
     << (decoder ? "" : cfg.data.task == "classify" ? ", tgt_out (" + std::to_string(batch.rows()) + ")"
                                                     : ", tgt_out (" + std::to_string(batch.rows()) + ", " + std::to_string(ids.size(1)) + ")")
     << "\n\n" << task_explanation(cfg);
  const std::int64_t shown = std::min(batch.rows(), std::max<std::int64_t>(opt.rows, 0));
  for (std::int64_t b = 0; b < shown; ++b) print_task_row(os, cfg, tb, b);
  if (shown < batch.rows()) os << "\n(" << batch.rows() - shown << " more rows; --rows N prints more)\n";
  print_task_counts(os, cfg, tb);
  return os.str();
}

}  // namespace

std::string explain_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  if (cfg.data.task != "translation" || cfg.model.arch != "encoder-decoder") return explain_task_batch(cfg, opt, log);
  const LoadedBatch lb = load_batch(cfg, opt, log);
  const std::int64_t shown = std::min(lb.batch.rows(), std::max<std::int64_t>(opt.rows, 0));  // rows printed in full
  std::ostringstream os;
  print_header(os, cfg, opt, lb);
  print_rows(os, lb, shown);
  print_padding_masks(os, lb, shown);
  print_causal_mask(os, lb, opt.max_causal);
  print_counts(os, cfg, lb);
  return os.str();
}

std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    std::uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (std::size_t k = 1; k < len && i + k < text.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                      (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x20000 && cp <= 0x3FFFD);
    width += wide ? 2 : 1;
    i += len;
  }
  return width;
}

}  // namespace sf::train
