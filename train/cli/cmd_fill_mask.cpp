// `scratchformer fill-mask --checkpoint FILE --text "Ein <mask> läuft im Schnee."`: what a
// masked-LM encoder (data.task = "mlm") predicts at each <mask>: the top-k tokens with their
// probabilities, and the sentence with every mask filled by its most likely token.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/tokenizer.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/setup.h"
#include "train/task.h"
#include "train/training_data.h"

namespace sf::cli {

namespace {

constexpr const char* kMask = "<mask>";

struct FillMaskArgs {
  std::string checkpoint, text;
  std::int64_t top_k = 5;
};

// A piece as a word: "▁Hund" -> "Hund" (the mark of a word start dropped).
std::string readable(const data::Tokenizer& tok, std::int64_t id) {
  std::string piece = tok.id_to_piece(id);
  if (piece.rfind("\xE2\x96\x81", 0) == 0) piece.erase(0, 3);  // U+2581
  return piece;
}

int run_fill_mask(const FillMaskArgs& a) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  train::require_model(im.config, a.checkpoint, "fill-mask", im.config.data.task == "mlm",
                       "an encoder-only model trained with data.task = \"mlm\"");
  const data::Tokenizer& tok = im.tokenizers->src;
  std::vector<std::int64_t> ids = train::encode_with_symbols(tok, a.text);
  const std::int64_t mask_id = tok.symbol_id(kMask), S = static_cast<std::int64_t>(ids.size());
  const auto masks = std::count(ids.begin(), ids.end(), mask_id);
  if (masks == 0) throw std::invalid_argument("fill-mask: --text has no <mask>, e.g. --text \"Ein <mask> läuft im Schnee.\"");
  if (S > im.config.model.max_len)
    throw std::invalid_argument("fill-mask: --text is " + std::to_string(S) + " tokens, the model has " +
                                std::to_string(im.config.model.max_len) + " positions (model.max_len)");
  NoGradGuard no_grad;
  const Tensor probs = softmax(im.model->forward(from_vector<std::int64_t>(ids, {1, S}), Tensor()), -1);  // (1,S,V)
  const std::int64_t V = probs.size(2), first = tok.first_ordinary_id();
  const auto p = probs.to_vector<float>();
  std::vector<std::int64_t> filled = ids;
  for (std::int64_t s = 0, k = 0; s < S; ++s) {
    if (ids[s] != mask_id) continue;
    std::vector<std::int64_t> order(static_cast<std::size_t>(V - first));
    std::iota(order.begin(), order.end(), first);  // ordinary tokens only
    const auto shown = std::min<std::size_t>(static_cast<std::size_t>(a.top_k), order.size());
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&](std::int64_t x, std::int64_t y) { return p[s * V + x] > p[s * V + y]; });
    std::cout << "mask " << ++k << " (token " << s + 1 << " of " << S << "):";
    for (std::size_t i = 0; i < shown; ++i)
      std::cout << (i ? "," : "") << " " << readable(tok, order[i]) << " " << std::fixed << std::setprecision(3)
                << p[s * V + order[i]];
    std::cout << "\n";
    filled[s] = order[0];
  }
  std::cout << "filled: " << tok.decode(filled) << "\n";
  return 0;
}

}  // namespace

Command add_fill_mask_command(CLI::App& app) {
  auto a = std::make_shared<FillMaskArgs>();
  CLI::App* cmd = app.add_subcommand("fill-mask", "Predict the tokens behind each <mask> with a masked-LM encoder");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint of an encoder-only model trained with data.task = \"mlm\"")
      ->required();
  cmd->add_option("--text", a->text, "A sentence with one or more <mask>, e.g. \"Ein <mask> läuft im Schnee.\"")->required();
  cmd->add_option("--top-k", a->top_k, "Tokens shown per mask (default: 5)")->check(at_least_one("a number of tokens"));
  return {cmd, [a] { return run_fill_mask(*a); }};
}

}  // namespace sf::cli
