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
#include "nn/model.h"
#include "train/run_log.h"
#include "train/setup.h"
#include "train/task.h"
#include "train/training_data.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

// ---- text in columns ----------------------------------------------------------------------

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
        std::string row = indent + pad_to_width(labels[l], label_w + 2);
        for (std::size_t c = start; c < end; ++c)
          row += pad_to_width(c < cells[l].size() ? cells[l][c] : "", col_w[c] + 2);
        while (!row.empty() && row.back() == ' ') row.pop_back();
        os << row << "\n";
      }
      start = end;
    }
    return os.str();
  }
};

constexpr std::size_t kLineWidth = 110;  // ColumnBlock lines wrap before this many columns

// A token piece as it is printed: a piece that takes no column at all (a zero-width space of the
// corpus, U+200B) is written as its code points, "U+200B", so that its column is not blank.
std::string visible_piece(const std::string& piece) {
  if (piece.empty() || display_width(piece) > 0) return piece;
  std::string out;
  for (std::size_t i = 0; i < piece.size();) {
    char32_t cp = 0;
    next_code_point(piece, i, cp);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%sU+%04X", out.empty() ? "" : ",", static_cast<unsigned>(cp));
    out += buf;
  }
  return out;
}

std::vector<std::string> row_ids_as_pieces(const data::Tokenizer& tok, const Tensor& ids, std::int64_t b) {
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < ids.size(1); ++i)
    out.push_back(visible_piece(tok.id_to_piece(static_cast<std::int64_t>(ids.at({b, i})))));
  return out;
}

std::vector<std::string> mask_row(const Tensor& mask, std::int64_t b) {  // mask: (B,1,1,L) bool
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < mask.size(3); ++i) out.push_back(mask.at({b, 0, 0, i}) != 0 ? "1" : "0");
  return out;
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// A label of the counts, 29 columns wide: "  rows (sentence pairs)        12".
std::string count_label(const std::string& label) { return "  " + pad_to_width(label, 29); }

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

// "kept 28990 of 29000 pairs (3 with an empty side, 7 longer than 100 tokens)", in `lang`.
std::string filter_summary(const data::FilterReport& r, std::int64_t max_tokens, Lang lang) {
  if (lang == Lang::En) return r.summary(max_tokens);
  return "保留 " + std::to_string(r.kept) + " / " + std::to_string(r.total()) + " 个句对（" + std::to_string(r.empty) +
         " 个有一侧为空，" + std::to_string(r.too_long) + " 个超过 " + std::to_string(max_tokens) + " 个词元）";
}

// Which batch this is, of which corpus and step; the shapes; what teacher forcing means.
void print_header(std::ostream& os, const Config& cfg, const ExplainOptions& opt, const LoadedBatch& lb, Lang lang) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows(), S = batch.src.size(1), T = batch.tgt_in.size(1);
  if (lang == Lang::Zh) {
    os << cfg.source_path << " 第 0 轮的第 " << opt.batch << " 个批次（共 " << lb.batches_per_epoch << " 个；seed "
       << cfg.train.seed << "，batch_tokens " << cfg.data.batch_tokens << "）";
    if (cfg.train.accum_steps == 1) os << "：训练第 " << opt.batch + 1 << " 步从它学习\n";
    else os << "：训练第 " << opt.batch / cfg.train.accum_steps + 1 << " 步的一部分（accum_steps " << cfg.train.accum_steps << "）\n";
    os << "训练语料：" << filter_summary(lb.report, cfg.data.max_tokens, lang) << "；分词器 " << lb.tok.src.model_path()
       << "（词表 " << lb.tok.src.vocab_size() << "）\n";
    os << "形状：src (" << B << ", " << S << ")，tgt_in 和 tgt_out (" << B << ", " << T << ")，src 填充掩码 (" << B
       << ", 1, 1, " << S << ")，因果掩码 (" << T << ", " << T << ")\n\n";
    os << "教师强制：tgt_in 是目标句右移一位、以 <s> 开头；tgt_out 是目标句后接 </s>。解码器的位置 t 读\n"
          "tgt_in[0..t]（因果掩码遮蔽其余位置），训练它预测 tgt_out[t]，也就是 tgt_in[t+1]：它读到的前一个词元\n"
          "是真实的词元，而不是模型自己的猜测。填充（<pad>，掩码为 1）把各行补齐到最长的一行；注意力和损失都忽略它。\n";
    return;
  }
  os << "batch " << opt.batch << " of " << lb.batches_per_epoch << " in epoch 0 of " << cfg.source_path << " (seed "
     << cfg.train.seed << ", batch_tokens " << cfg.data.batch_tokens << ")";
  if (cfg.train.accum_steps == 1)
    os << ": what training step " << opt.batch + 1 << " learns from\n";
  else
    os << ": part of training step " << opt.batch / cfg.train.accum_steps + 1 << " (accum_steps " << cfg.train.accum_steps << ")\n";
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
void print_row(std::ostream& os, const LoadedBatch& lb, std::int64_t b, Lang lang) {
  const data::Batch& batch = lb.batch;
  const std::int64_t S = batch.src.size(1), T = batch.tgt_in.size(1);
  const auto index = static_cast<std::size_t>(batch.indices[static_cast<std::size_t>(b)]);
  if (lang == Lang::Zh) os << "\n第 " << b << " 行（过滤后的第 " << index << " 个训练句对）：";
  else os << "\nrow " << b << " (training pair " << index << " after filtering): ";
  os << in_quotes(lb.corpus.src[index]) << " -> " << in_quotes(lb.corpus.tgt[index]) << "\n";
  ColumnBlock block;
  block.labels = {text(lang, "position", "位置"), "src", text(lang, "src padding", "src 填充"), "tgt_in", "tgt_out",
                  text(lang, "tgt padding", "tgt 填充")};
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
void print_decoder_reading(std::ostream& os, const LoadedBatch& lb, Lang lang) {
  const data::Batch& batch = lb.batch;
  const std::int64_t T = batch.tgt_in.size(1);
  const std::vector<std::string> in = row_ids_as_pieces(lb.tok.tgt, batch.tgt_in, 0);
  const std::vector<std::string> out = row_ids_as_pieces(lb.tok.tgt, batch.tgt_out, 0);
  os << text(lang, "  reading row 0 as the decoder does:\n", "  像解码器那样读第 0 行：\n");
  for (std::int64_t t = 0; t < std::min<std::int64_t>(T, 4); ++t) {
    if (out[static_cast<std::size_t>(t)] == lb.tok.tgt.id_to_piece(data::kPadId)) break;
    std::string seen;
    for (std::int64_t j = 0; j <= t; ++j) seen += (j ? " " : "") + in[static_cast<std::size_t>(j)];
    os << "    t=" << t << text(lang, ": sees ", "：看到 ") << seen << text(lang, "  ->  must predict ", "  ->  须预测 ")
       << out[static_cast<std::size_t>(t)] << "\n";
  }
}

// "(37 more rows; --rows N prints more)" when not every row of the batch was printed.
void print_more_rows(std::ostream& os, std::int64_t rows, std::int64_t shown, Lang lang) {
  if (shown >= rows) return;
  if (lang == Lang::Zh) os << "\n（还有 " << rows - shown << " 行；--rows N 打印更多行）\n";
  else os << "\n(" << rows - shown << " more rows; --rows N prints more)\n";
}

// The first `shown` rows in full, row 0 also as the decoder reads it.
void print_rows(std::ostream& os, const LoadedBatch& lb, std::int64_t shown, Lang lang) {
  for (std::int64_t b = 0; b < shown; ++b) {
    print_row(os, lb, b, lang);
    if (b == 0) print_decoder_reading(os, lb, lang);
  }
  print_more_rows(os, lb.batch.rows(), shown, lang);
}

// The padding masks as 0/1 strings for the first rows of the batch, and how many rows hold any
// padding.
void print_padding_masks(std::ostream& os, const LoadedBatch& lb, std::int64_t shown, Lang lang) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows();
  constexpr std::int64_t kMaskRows = 8;
  const std::int64_t mask_rows = std::min(B, std::max(kMaskRows, shown));
  if (lang == Lang::Zh) os << "\n前 " << mask_rows << " 行的填充掩码（1 = 填充：作为键被遮蔽，损失也忽略它）：\n";
  else os << "\npadding masks of the first " << mask_rows << " rows (1 = padding: blocked as a key, ignored by the loss):\n";
  ColumnBlock masks;
  masks.labels = {text(lang, "row", "行")};
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
  if (lang == Lang::Zh) os << "  " << B << " 行中有 " << padded_rows << " 行含填充";
  else os << "  " << padded_rows << " of the " << B << " rows hold padding";
  if (padded_rows * 4 < B)
    os << text(lang, " (few: the batcher sorts pairs by length before cutting batches, so a batch holds similar lengths)",
               "（很少：批处理器先按长度给句对排序再切出批次，所以一个批次里的长度相近）");
  os << "\n";
}

// The decoder self-attention's causal mask for at most `max_causal` positions.
void print_causal_mask(std::ostream& os, const LoadedBatch& lb, std::int64_t max_causal, Lang lang) {
  const std::int64_t T = lb.batch.tgt_in.size(1);
  const std::int64_t n = std::min(T, std::max<std::int64_t>(max_causal, 1));
  os << text(lang, "\ncausal mask of the decoder self-attention (1 = blocked: a later position)",
             "\n解码器自注意力的因果掩码（1 = 遮蔽：更靠后的位置）");
  if (n < T && lang == Lang::Zh) os << "，" << T << " 个位置中的前 " << n << " 个";
  else if (n < T) os << ", the first " << n << " of " << T << " positions";
  os << text(lang, ";\nrow = query position t, column = key position j, blocked where j > t:\n",
             "；\n行 = 查询位置 t，列 = 键位置 j，j > t 处被遮蔽：\n");
  const Tensor causal = nn::causal_mask(n, n);  // (n,n)
  for (std::int64_t i = 0; i < n; ++i) {
    std::string line = "  ";
    for (std::int64_t j = 0; j < n; ++j) line += causal.at({i, j}) != 0 ? "1" : "0";
    os << line << "\n";
  }
  os << text(lang, "(the decoder's self-attention blocks a key if it is later OR padding: causal mask | target padding mask)\n",
             "（解码器自注意力遮蔽更靠后的键，或是填充的键：因果掩码 | 目标填充掩码）\n");
}

// Rows, real tokens against padding cells, and the token budget the batch fills.
void print_counts(std::ostream& os, const Config& cfg, const LoadedBatch& lb, Lang lang) {
  const data::Batch& batch = lb.batch;
  const std::int64_t B = batch.rows(), S = batch.src.size(1), T = batch.tgt_in.size(1);
  const std::int64_t src_cells = B * S, tgt_cells = B * T, padded = B * std::max(S, T);
  const auto cells = [lang](std::int64_t tokens, std::int64_t all) {  // "40 of 48 cells (16.7% padding)"
    return lang == Lang::Zh ? std::to_string(tokens) + " / " + std::to_string(all) + " 个格子（" + percent(all - tokens, all) + " 是填充）"
                            : std::to_string(tokens) + " of " + std::to_string(all) + " cells (" + percent(all - tokens, all) + " padding)";
  };
  os << text(lang, "\ncounts:\n", "\n计数：\n")
     << count_label(text(lang, "rows (sentence pairs)", "行数（句对）")) << B << "\n"
     << count_label(text(lang, "source tokens", "源端词元")) << cells(batch.src_tokens, src_cells) << "\n"
     << count_label(text(lang, "target predictions (loss)", "目标预测（损失）")) << cells(batch.tgt_tokens, tgt_cells)
     << text(lang, ": the target tokens plus one </s> per row\n", "：目标词元，外加每行一个 </s>\n")
     << count_label(text(lang, "budget", "预算")) << "rows * max(S, T) = " << B << " * " << std::max(S, T) << " = " << padded
     << text(lang, " of batch_tokens ", "，batch_tokens 为 ") << cfg.data.batch_tokens << "\n";
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
std::string task_explanation(const Config& cfg, Lang lang) {
  if (cfg.data.task == "translation")
    return text(lang,
                "Prompted translation (decoder-only): source and target are ONE causal sequence, tgt_in = <s> source <sep>\n"
                "target. tgt_out[t] = tgt_in[t+1] where a target token (or </s>) comes next, and <pad> over the prompt:\n"
                "the source is given, so the loss reads only the target. There is no cross-attention: the target's\n"
                "positions see the source through the same causal self-attention.\n",
                "提示式翻译（仅解码器）：源句和目标句是同一个因果序列，tgt_in = <s> 源句 <sep> 目标句。下一个是目标\n"
                "词元（或 </s>）的位置上 tgt_out[t] = tgt_in[t+1]，提示部分则是 <pad>：源句是给定的，所以损失只读目标\n"
                "部分。这里没有交叉注意力：目标的各个位置通过同一个因果自注意力看到源句。\n");
  if (cfg.data.task == "lm")
    return text(lang,
                "Language modelling (decoder-only): tgt_in = <s> x_1 .. x_n, tgt_out = x_1 .. x_n </s>. Position t reads\n"
                "x_1..x_t (the causal mask hides the rest) and is trained to predict x_{t+1}: h_t = f(x_1..x_t).\n",
                "语言建模（仅解码器）：tgt_in = <s> x_1 .. x_n，tgt_out = x_1 .. x_n </s>。位置 t 读 x_1..x_t（因果掩码\n"
                "遮蔽其余部分），训练它预测 x_{t+1}：h_t = f(x_1..x_t)。\n");
  if (cfg.data.task == "mlm")
    return text(lang,
                "Masked LM (encoder-only, BERT's recipe): 15% of the ordinary tokens are chosen; of those 80% become\n"
                "<mask>, 10% a random token, 10% stay. src is what the encoder reads; tgt_out holds the original token\n"
                "at the chosen positions and <pad> elsewhere, so the loss reads only them. No causal mask: every\n"
                "position sees every other (padding aside), to the left and to the right.\n",
                "掩码语言模型（仅编码器，BERT 的做法）：选出 15% 的普通词元，其中 80% 换成 <mask>，10% 换成随机词元，\n"
                "10% 保持不变。src 是编码器读到的内容；tgt_out 在选中的位置放原来的词元，其他位置放 <pad>，所以损失\n"
                "只读这些位置。没有因果掩码：每个位置都能看到左右两边的所有其他位置（填充除外）。\n");
  return text(lang,
              "Classification (encoder-only): src = <cls> text_a [<sep> text_b]; the encoder's outputs are pooled into\n"
              "one vector (model.pooling: the mean over the non-padding tokens, or the <cls> position) and a linear\n"
              "layer scores the classes; tgt_out is the label, one prediction per row.\n",
              "分类（仅编码器）：src = <cls> text_a [<sep> text_b]；编码器的输出汇聚成一个向量（model.pooling：对\n"
              "非填充词元取平均，或取 <cls> 位置），再由一个线性层给各类别打分；tgt_out 是标签，每行一个预测。\n");
}

// Row b of a task's batch: its example, then its tokens (and masks) in columns.
void print_task_row(std::ostream& os, const Config& cfg, const TaskBatch& tb, std::int64_t b, Lang lang) {
  const data::Batch& batch = tb.batch;
  const auto index = static_cast<std::size_t>(batch.indices[static_cast<std::size_t>(b)]);
  if (lang == Lang::Zh) os << "\n第 " << b << " 行（第 " << index << " 个样本）：";
  else os << "\nrow " << b << " (example " << index << "): ";
  os << in_quotes(tb.split.src_text[index]);
  if (cfg.data.task == "translation") os << " -> " << in_quotes(tb.split.tgt_text[index]);
  if (cfg.data.task == "classify")
    os << text(lang, " -> label ", " -> 标签 ") << tb.split.tgt_text[index] << text(lang, " (class ", "（类别 ")
       << tb.split.tgt[index][0] << text(lang, ")", "）");
  os << "\n";
  ColumnBlock block;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  std::vector<std::string> positions;
  for (std::int64_t i = 0; i < ids.size(1); ++i) positions.push_back(std::to_string(i));
  const std::string position = text(lang, "position", "位置"), padding = text(lang, "padding", "填充");
  if (decoder) {
    block.labels = {position, "tgt_in", "tgt_out", padding};
    block.cells = {positions, row_ids_as_pieces(tb.tok.tgt, batch.tgt_in, b), row_ids_as_pieces(tb.tok.tgt, batch.tgt_out, b),
                   mask_row(batch.tgt_pad_mask, b)};
  } else {
    block.labels = {position, "src", padding};
    block.cells = {positions, row_ids_as_pieces(tb.tok.src, batch.src, b), mask_row(batch.src_pad_mask, b)};
    if (cfg.data.task == "mlm") {
      std::vector<std::string> original;
      for (const std::int64_t id : tb.split.src[index]) original.push_back(visible_piece(tb.tok.src.id_to_piece(id)));
      block.labels.insert(block.labels.begin() + 1, text(lang, "original", "原词元"));
      block.cells.insert(block.cells.begin() + 1, original);
      block.labels.push_back("tgt_out");
      block.cells.push_back(row_ids_as_pieces(tb.tok.src, batch.tgt_out, b));
    }
  }
  os << block.render("  ", kLineWidth);
}

void print_task_counts(std::ostream& os, const Config& cfg, const TaskBatch& tb, Lang lang) {
  const data::Batch& batch = tb.batch;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  const std::int64_t B = batch.rows(), L = ids.size(1);
  const std::string what =
      cfg.data.task == "mlm"        ? text(lang, "the chosen (masked) positions", "选中（掩码）的位置")
      : cfg.data.task == "classify" ? text(lang, "one label per row", "每行一个标签")
      : cfg.data.task == "lm"       ? text(lang, "every token plus one </s> per row", "每个词元，外加每行一个 </s>")
                                    : text(lang, "the target tokens plus one </s> per row, not the prompt",
                                           "目标词元，外加每行一个 </s>，不含提示");
  os << text(lang, "\ncounts:\n", "\n计数：\n") << count_label(text(lang, "rows", "行数")) << B << "\n"
     << count_label(text(lang, "predictions (loss)", "预测（损失）")) << batch.tgt_tokens << text(lang, ": ", "：") << what << "\n"
     << count_label(text(lang, "budget", "预算")) << "rows * " << (cfg.data.task == "translation" ? "(S + T + 2)" : "length")
     << " = " << B << " * " << L << " = " << B * L << text(lang, " of batch_tokens ", "，batch_tokens 为 ")
     << cfg.data.batch_tokens << "\n";
}

std::string explain_task_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log, Lang lang) {
  const TaskBatch tb = load_task_batch(cfg, opt, log);
  const data::Batch& batch = tb.batch;
  const bool decoder = batch.tgt_in.defined();
  const Tensor& ids = decoder ? batch.tgt_in : batch.src;
  const std::string B = std::to_string(batch.rows()), L = std::to_string(ids.size(1));
  std::ostringstream os;
  if (lang == Lang::Zh)
    os << cfg.source_path << " 第 0 轮的第 " << opt.batch << " 个批次（共 " << tb.batches_per_epoch << " 个；data.task "
       << cfg.data.task << "，model.arch " << cfg.model.arch << "，seed " << cfg.train.seed << "）\n形状：";
  else
    os << "batch " << opt.batch << " of " << tb.batches_per_epoch << " in epoch 0 of " << cfg.source_path << " (data.task "
       << cfg.data.task << ", model.arch " << cfg.model.arch << ", seed " << cfg.train.seed << ")\nshapes: ";
  const std::string and_ = text(lang, " and ", " 和 "), comma = text(lang, ", ", "，");
  os << (decoder ? "tgt_in" + and_ + "tgt_out (" : "src (") << B << ", " << L << ")"
     << (decoder ? "" : cfg.data.task == "classify" ? comma + "tgt_out (" + B + ")" : comma + "tgt_out (" + B + ", " + L + ")")
     << "\n\n" << task_explanation(cfg, lang);
  const std::int64_t shown = std::min(batch.rows(), std::max<std::int64_t>(opt.rows, 0));
  for (std::int64_t b = 0; b < shown; ++b) print_task_row(os, cfg, tb, b, lang);
  print_more_rows(os, batch.rows(), shown, lang);
  print_task_counts(os, cfg, tb, lang);
  return os.str();
}

}  // namespace

std::string explain_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log, Lang lang) {
  nn::require_transformer(nn::parse_arch(cfg.model.arch), "explain-batch");  // the masks explained are attention's
  if (cfg.data.task != "translation" || cfg.model.arch != "encoder-decoder") return explain_task_batch(cfg, opt, log, lang);
  const LoadedBatch lb = load_batch(cfg, opt, log);
  const std::int64_t shown = std::min(lb.batch.rows(), std::max<std::int64_t>(opt.rows, 0));  // rows printed in full
  std::ostringstream os;
  print_header(os, cfg, opt, lb, lang);
  print_rows(os, lb, shown, lang);
  print_padding_masks(os, lb, shown, lang);
  print_causal_mask(os, lb, opt.max_causal, lang);
  print_counts(os, cfg, lb, lang);
  return os.str();
}

}  // namespace sf::train
