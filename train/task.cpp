#include "train/task.h"

#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/tasks.h"

namespace sf::train {

std::vector<std::string> task_symbols(const Config& cfg) {
  const std::string& task = cfg.data.task;
  if (task == "translation") return cfg.model.arch == "decoder-only" ? std::vector<std::string>{"<sep>"} : std::vector<std::string>{};
  if (task == "mlm") return {"<mask>"};
  if (task == "classify") return {"<cls>", "<sep>"};
  return {};
}

void require_model(const Config& cfg, const std::string& checkpoint, const std::string& command, bool fits,
                   const std::string& needed) {
  if (fits) return;
  const std::string& arch = cfg.model.arch;
  throw std::invalid_argument(command + " needs " + needed + ", but " + checkpoint + " holds " +
                              (arch == "decoder-only" ? "a " : "an ") + arch +
                              " model trained with data.task = \"" + cfg.data.task + "\"");
}

TaskBatches::TaskBatches(const Config& cfg, const Tokenizers& tok)
    : task_(cfg.data.task), decoder_only_(cfg.model.arch == "decoder-only"), seed_(static_cast<std::uint64_t>(cfg.train.seed)) {
  if (task_ == "translation" && decoder_only_) sep_id_ = tok.src.symbol_id("<sep>");
  if (task_ == "mlm") mask_id_ = tok.src.symbol_id("<mask>");
  first_ordinary_ = tok.src.first_ordinary_id();
  vocab_ = tok.src.vocab_size();
}

data::Batcher::Rows TaskBatches::rows() const {
  return task_ == "translation" && decoder_only_ ? data::Batcher::Rows::Joined : data::Batcher::Rows::Pair;
}

std::int64_t TaskBatches::ignore_index() const { return task_ == "classify" ? -100 : data::kPadId; }

namespace {

// The masking generator of one row: a function of (seed, epoch, row) only.
Generator row_generator(std::uint64_t seed, std::int64_t epoch, std::int64_t row) {
  Generator mixer(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(epoch + 1)));
  return Generator(mixer.next_u64() ^ (0xBF58476D1CE4E5B9ULL * static_cast<std::uint64_t>(row + 1)));
}

}  // namespace

data::Batch TaskBatches::make(const EncodedSplit& split, const std::vector<std::int64_t>& indices, std::int64_t epoch) const {
  std::vector<const std::vector<std::int64_t>*> src, tgt;
  for (const std::int64_t i : indices) src.push_back(&split.src[i]), tgt.push_back(&split.tgt[i]);
  if (task_ == "translation")
    return decoder_only_ ? data::make_prompted_batch(src, tgt, indices, sep_id_) : data::make_batch(src, tgt, indices);
  if (task_ == "lm") return data::make_lm_batch(src, indices);
  if (task_ == "classify") {
    std::vector<std::int64_t> labels;
    for (const auto* t : tgt) labels.push_back(t->front());
    return data::make_classify_batch(src, labels, indices);
  }
  std::vector<data::MaskedRow> rows;  // mlm
  for (std::size_t r = 0; r < indices.size(); ++r) {
    Generator gen = row_generator(seed_, epoch, indices[r]);
    rows.push_back(data::mask_tokens(*src[r], gen, mask_id_, first_ordinary_, vocab_));
  }
  return data::make_mlm_batch(rows, indices);
}

std::int64_t count_correct(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, std::int64_t& total) {
  const std::int64_t N = logits.size(0), V = logits.size(1);
  const auto values = logits.contiguous().to_vector<float>();
  const auto wanted = targets.to_vector<std::int64_t>();
  std::int64_t correct = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (wanted[n] == ignore_index) continue;
    std::int64_t best = 0;
    for (std::int64_t v = 1; v < V; ++v)
      if (values[n * V + v] > values[n * V + best]) best = v;
    correct += best == wanted[n];
    ++total;
  }
  return correct;
}

TaskMetrics evaluate_task(nn::Model& model, const TaskBatches& task, const EncodedSplit& split, std::int64_t batch_tokens,
                          double label_smoothing) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  data::Batcher batcher(split.src, split.tgt, batch_tokens, 0, /*shuffle=*/false, task.rows());
  TaskMetrics m;
  double loss_sum = 0, nll_sum = 0;
  std::int64_t correct = 0, counted = 0;
  std::vector<std::int64_t> indices;
  while (batcher.next_indices(indices)) {
    const data::Batch batch = task.make(split, indices, /*epoch=*/0);
    const Tensor logits = model.forward(batch.src, batch.tgt_in);  // (B,T,V) or (B,C)
    const Tensor flat = logits.reshape({-1, logits.size(-1)});
    const Tensor targets = batch.tgt_out.reshape({-1});
    const double n = static_cast<double>(batch.tgt_tokens);
    loss_sum += cross_entropy(flat, targets, task.ignore_index(), label_smoothing).item() * n;  // mean -> sum
    nll_sum += cross_entropy(flat, targets, task.ignore_index(), 0.0).item() * n;
    m.predictions += batch.tgt_tokens;
    if (task.counts_accuracy()) correct += count_correct(flat, targets, task.ignore_index(), counted);
  }
  if (m.predictions > 0) m.loss = loss_sum / static_cast<double>(m.predictions), m.nll = nll_sum / static_cast<double>(m.predictions);
  if (task.counts_accuracy() && counted > 0) m.accuracy = static_cast<double>(correct) / static_cast<double>(counted);
  model.train(was_training);
  return m;
}

}  // namespace sf::train
