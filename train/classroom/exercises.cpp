// The exercise registry (exercises.h).
#include "train/classroom/exercises.h"

#include <stdexcept>

namespace sf::train {

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> kExercises = {
      {"matmul", "backward of the matrix product a @ b (batched, broadcast)", "矩阵乘法 a @ b 的反向传播（批量、广播）",
       {"autograd/ops_matmul.cpp"}},
      {"linear", "backward of the linear layer y = x W^T + b", "线性层 y = x W^T + b 的反向传播", {"autograd/ops_linear.cpp"}},
      {"relu", "backward of ReLU max(x, 0)", "ReLU max(x, 0) 的反向传播", {"autograd/ops_unary.cpp"}},
      {"embedding", "backward of the embedding lookup E[ids]", "词嵌入查表 E[ids] 的反向传播", {"autograd/ops_index.cpp"}},
      {"scaled_dot_product", "scaled dot-product attention softmax(q k^T / sqrt(Dh)) v",
       "缩放点积注意力 softmax(q k^T / sqrt(Dh)) v", {"nn/attention.cpp", "autograd/ops_attention.cpp"}},
      {"masks", "the causal mask and the padding mask", "因果掩码与填充掩码", {"nn/attention.cpp"}},
      {"sinusoidal", "the sinusoidal position table", "正弦位置编码表", {"nn/positional.cpp"}},
      {"rope", "rotary position embedding (RoPE)", "旋转位置编码 (RoPE)", {"nn/relative_positions.cpp"}},
      {"multi_head", "splitting into heads and merging them back", "多头的拆分与合并", {"nn/attention.cpp"}},
      {"layer_norm", "LayerNorm, forward and backward", "层归一化 LayerNorm 的前向与反向", {"autograd/ops_norm.cpp"}},
      {"softmax", "backward of softmax and log_softmax", "softmax 与 log_softmax 的反向传播", {"autograd/ops_softmax.cpp"}},
      {"cross_entropy", "cross-entropy loss, forward and backward", "交叉熵损失的前向与反向", {"autograd/ops_loss.cpp"}},
      {"kv_cache", "appending keys and values to the KV cache", "向 KV 缓存追加键和值", {"nn/attention.cpp"}},
      {"greedy", "greedy decoding", "贪心解码", {"train/eval/decode.cpp"}},
  };
  return kExercises;
}

const Exercise* find_exercise(const std::string& word) {
  for (const Exercise& e : exercises())
    if (e.word == word) return &e;
  return nullptr;
}

const Exercise& require_exercise(const std::string& word, const std::string& context) {
  if (const Exercise* e = find_exercise(word)) return *e;
  throw std::invalid_argument(context + ": unknown exercise '" + word + "'; valid: " + exercise_words());
}

std::string exercise_words() {
  std::string words;
  for (const Exercise& e : exercises()) words += (words.empty() ? "" : ", ") + e.word;
  return words;
}

}  // namespace sf::train
