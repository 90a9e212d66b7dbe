// The exercise registry (exercises.h).
#include "train/classroom/exercises.h"

#include <algorithm>
#include <stdexcept>

namespace sf::train {

const std::vector<Lecture>& lectures() {
  static const std::vector<Lecture> kLectures = {
      {"autograd", "backpropagation through the building blocks", "基本运算的反向传播"},
      {"attention", "scaled dot-product attention, masks, heads, softmax", "缩放点积注意力、掩码、多头、softmax"},
      {"positions", "where a token is: sinusoidal and rotary positions", "位置编码：正弦与旋转"},
      {"layers", "the Transformer layer: normalisation", "Transformer 层：归一化"},
      {"training", "the loss the model learns from", "训练所用的损失"},
      {"decoding", "generating a translation: the KV cache, greedy search", "生成译文：KV 缓存与贪心搜索"},
      // The lecture's "before"; its exercises come last because they build on the ones above
      // (additive attention runs a whole model: embedding, linear, softmax).
      {"recurrent", "before the Transformer: recurrent networks and alignment attention", "Transformer 之前：循环网络与对齐注意力"},
  };
  return kLectures;
}

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> kExercises = {
      {"matmul", "backward of the matrix product a @ b (batched, broadcast)", "矩阵乘法 a @ b 的反向传播（批量、广播）",
       {"autograd/ops_matmul.cpp"}, "autograd", {"MatMul::backward"}, {}},
      {"linear", "backward of the linear layer y = x W^T + b", "线性层 y = x W^T + b 的反向传播", {"autograd/ops_linear.cpp"},
       "autograd", {"Linear::backward"}, {}},
      {"relu", "backward of ReLU max(x, 0)", "ReLU max(x, 0) 的反向传播", {"autograd/ops_unary.cpp"}, "autograd",
       {"Relu::derivative", "Relu::backward"}, {}},
      {"embedding", "backward of the embedding lookup E[ids]", "词嵌入查表 E[ids] 的反向传播", {"autograd/ops_index.cpp"},
       "autograd", {"Embedding::backward"}, {}},
      {"scaled_dot_product", "scaled dot-product attention softmax(q k^T / sqrt(Dh)) v",
       "缩放点积注意力 softmax(q k^T / sqrt(Dh)) v", {"nn/attention.cpp", "autograd/ops_attention.cpp"}, "attention",
       {"weights_of", "scaled_dot_product_attention", "attention_naive"}, {}},
      {"masks", "the causal mask and the padding mask", "因果掩码与填充掩码", {"nn/attention.cpp"}, "attention",
       {"causal_mask", "padding_mask"}, {}},
      {"sinusoidal", "the sinusoidal position table", "正弦位置编码表", {"nn/positional.cpp"}, "positions",
       {"sinusoidal_table"}, {}},
      {"rope", "rotary position embedding (RoPE)", "旋转位置编码 (RoPE)", {"nn/relative_positions.cpp"}, "positions",
       {"apply_rope"}, {}},
      {"multi_head", "splitting into heads and merging them back", "多头的拆分与合并", {"nn/attention.cpp"}, "attention",
       {"split_heads", "merge_heads"}, {}},
      {"layer_norm", "LayerNorm, forward and backward", "层归一化 LayerNorm 的前向与反向", {"autograd/ops_norm.cpp"}, "layers",
       {"layernorm_forward", "layernorm_backward"}, {1, 2}},
      {"softmax", "backward of softmax and log_softmax", "softmax 与 log_softmax 的反向传播", {"autograd/ops_softmax.cpp"},
       "attention", {"softmax_backward_kernel"}, {}},
      {"cross_entropy", "cross-entropy loss, forward and backward", "交叉熵损失的前向与反向", {"autograd/ops_loss.cpp"},
       "training", {"cross_entropy_forward", "cross_entropy_backward"}, {1, 2}},
      {"kv_cache", "appending keys and values to the KV cache", "向 KV 缓存追加键和值", {"nn/attention.cpp"}, "decoding",
       {"append_to_cache"}, {}},
      {"greedy", "greedy decoding", "贪心解码", {"train/eval/decode.cpp"}, "decoding", {"greedy_decode"}, {}},
      {"lstm_cell", "backward of the LSTM cell: the new state c and the output h", "LSTM 单元的反向传播：新状态 c 与输出 h",
       {"autograd/ops_recurrent.cpp"}, "recurrent", {"LSTMCellState::grads", "LSTMCellOutput::grads"}, {}},
      {"additive_attention", "Bahdanau's additive attention score v^T tanh(W_q q + W_k k)",
       "Bahdanau 加性注意力的打分 v^T tanh(W_q q + W_k k)", {"nn/rnn_seq2seq.cpp"}, "recurrent", {"additive_scores"}, {}},
  };
  return kExercises;
}

int part_weight(const Exercise& e, std::size_t i) { return i < e.weights.size() ? e.weights[i] : 1; }

const Exercise* find_exercise(const std::string& word) {
  for (const Exercise& e : exercises())
    if (e.word == word) return &e;
  return nullptr;
}

const Exercise& require_exercise(const std::string& word, const std::string& context) {
  if (const Exercise* e = find_exercise(word)) return *e;
  const std::string close = closest_exercise(word);
  throw std::invalid_argument(context + ": unknown exercise '" + word + "'" +
                              (close.empty() ? "" : " (did you mean '" + close + "'?)") + "; valid: " + exercise_words());
}

std::string exercise_words() {
  std::string words;
  for (const Exercise& e : exercises()) words += (words.empty() ? "" : ", ") + e.word;
  return words;
}

namespace {
// The edit distance of a and b: insertions, deletions and substitutions of one character.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string closest_exercise(const std::string& word) {
  std::string best;
  std::size_t best_distance = 3;  // more than two edits away is not a typo
  for (const Exercise& e : exercises()) {
    const std::size_t d = word.size() >= 3 && e.word.starts_with(word) ? 1 : edit_distance(word, e.word);
    if (d < best_distance) best = e.word, best_distance = d;
  }
  return best;
}

std::vector<std::string> lecture_exercises(const std::string& word) {
  std::string words;
  for (const Lecture& l : lectures()) {
    if (l.word != word) {
      words += (words.empty() ? "" : ", ") + l.word;
      continue;
    }
    std::vector<std::string> chosen;
    for (const Exercise& e : exercises())
      if (e.lecture == word) chosen.push_back(e.word);
    return chosen;
  }
  throw std::invalid_argument("unknown lecture '" + word + "'; valid: " + words);
}

}  // namespace sf::train
