// demo label-smoothing: with label smoothing eps the target is no longer one-hot. In this
// project (autograd/ops_loss.cpp, as torch.nn.CrossEntropyLoss) it is
//     q = (1 - eps) onehot(gold) + eps / V        (eps / V on EVERY class, the gold one included),
// so the gold class gets 1 - eps + eps/V and each other class eps/V. The smoothed loss is the
// cross-entropy H(q, p) = H(q) + KL(q || p): its minimum is H(q) > 0, reached by predicting
// p = q. So a smoothed training loss never goes to 0, and the NLL of the gold class stays at
// -log q_gold there, while training on the plain NLL (eps = 0) drives the loss to 0.
//
// Letters: V classes.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct LabelSmoothingResult {
  std::int64_t classes = 0, gold = 0, steps = 0;
  double eps = 0, lr = 0;
  std::vector<double> target;  // (V) q
  double entropy = 0;          // H(q) = -sum_j q_j log q_j
  double loss_at_optimum = 0;  // cross_entropy(log q, gold, eps): the smoothed loss at p = q
  double nll_at_optimum = 0;   // cross_entropy(log q, gold, 0) = -log q_gold
  // Gradient descent on a logits vector from zeros: one run on the smoothed loss, one on the NLL.
  // Per step (0..steps): the smoothed loss and the NLL of the current logits.
  std::vector<double> smoothed_run_loss, smoothed_run_nll, nll_run_nll, nll_run_smoothed;
  std::vector<double> smoothed_run_p, nll_run_p;  // (V) softmax of each run's final logits
  double min_gap = 0;  // min over the smoothed run of (smoothed loss - H(q)) (>= 0 up to rounding)
};

LabelSmoothingResult compute_label_smoothing();
// The demo's verdict: the loss at p = q is H(q); the smoothed run ends at H(q) (p = q) and never
// below it; the NLL run ends near 0.
bool label_smoothing_held(const LabelSmoothingResult& r);

}  // namespace sf::lessons
