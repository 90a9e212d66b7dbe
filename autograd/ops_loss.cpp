// Fused softmax + cross-entropy, with ignore_index and label smoothing.
//
// Letters: N rows (positions scored, e.g. B*T target tokens), V classes (the vocabulary).
//
// For row n with gold class y = targets[n], log-probabilities computed stably:
//   lse[n]     = max_v logits[n,v] + log(sum_v exp(logits[n,v] - max))     (log-sum-exp)
//   logp[n,v]  = logits[n,v] - lse[n]
// Target distribution with label smoothing eps (as torch.nn.CrossEntropyLoss):
//   q[n,v]     = (1 - eps) [v == y] + eps / V
//   loss[n]    = -sum_v q[n,v] logp[n,v] = -((1 - eps) logp[n,y] + (eps / V) sum_v logp[n,v])
//   loss       = (1 / count) sum of loss[n] over the rows with y != ignore_index
// If every row is ignored (count = 0) the loss is 0 and every gradient is 0: there is nothing
// to learn from that batch, and 0/0 would put a NaN into training (torch returns NaN here).
//
// Backward, the reason to fuse: d loss[n] / d logits[n,v] = softmax[n,v] - q[n,v], so
//   grad_logits[n,v] = grad_output * (exp(logits[n,v] - lse[n]) - q[n,v]) / count   kept rows
//   grad_logits[n,v] = 0                                                            ignored rows
// (grad_output is the loss's own gradient, a number: 1 when the loss is the root of backward).
// Composed from log_softmax, a gather and a mean, the same gradient would take three nodes and
// an (N, V) log-probability tensor kept for backward.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/exercise.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// logits: (N, V), targets: (N) -> row_loss, lse: (N) (both left untouched on ignored rows).
template <class T>
void cross_entropy_forward(double* row_loss, double* lse, const T* logits, const std::int64_t* targets,
                           std::int64_t N, std::int64_t V, std::int64_t ignore_index, double smoothing) {
  // EXERCISE(cross_entropy): for every row n whose target is not ignore_index: lse[n] = the row's
  // log-sum-exp, computed stably (subtract the row max before exp), and
  // row_loss[n] = -((1 - smoothing) logp[n, y] + (smoothing / V) sum_v logp[n, v]), logp = logit - lse
  // (the smoothing term only when smoothing > 0: a -inf logit would give 0 * -inf). Leave ignored rows.
  // BEGIN SOLUTION
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    const T* row = logits + n * V;
    T m = row[0];
    for (std::int64_t v = 1; v < V; ++v) m = std::max(m, row[v]);
    double sum_exp = 0;  // in double: rows of 8000 terms stay accurate
    for (std::int64_t v = 0; v < V; ++v) sum_exp += std::exp(static_cast<double>(row[v]) - m);  // terms <= 1
    lse[n] = m + std::log(sum_exp);
    const double logp_gold = row[targets[n]] - lse[n];
    row_loss[n] = -(1 - smoothing) * logp_gold;
    if (smoothing > 0) {  // skipped at 0: a -inf logit (a masked class) would give 0 * -inf = NaN
      double sum_logits = 0;
      for (std::int64_t v = 0; v < V; ++v) sum_logits += row[v];
      const double sum_logp = sum_logits - static_cast<double>(V) * lse[n];
      row_loss[n] -= smoothing / static_cast<double>(V) * sum_logp;
    }
  }
  // END SOLUTION
}

// logits: (N, V), targets, lse: (N) -> dlogits: (N, V) = scale * (softmax - q) on kept rows,
// 0 on ignored rows. scale = grad_output / count.
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const std::int64_t* targets, const double* lse,
                            std::int64_t N, std::int64_t V, std::int64_t ignore_index, double smoothing,
                            double scale) {
  // EXERCISE(cross_entropy): dlogits[n, v] = scale * (softmax[n, v] - q[n, v]) on the rows kept, 0 on
  // the rows whose target is ignore_index; softmax[n, v] = exp(logits[n, v] - lse[n]) from the saved
  // lse, q[n, v] = smoothing / V, plus (1 - smoothing) at the target class y = targets[n].
  // BEGIN SOLUTION
  const double q_floor = smoothing / static_cast<double>(V);  // q on every class but the gold one
  for (std::int64_t n = 0; n < N; ++n) {
    T* d_row = dlogits + n * V;
    const T* row = logits + n * V;
    if (targets[n] == ignore_index) {  // an ignored row (padding) gets no gradient
      std::fill(d_row, d_row + V, T(0));
      continue;
    }
    for (std::int64_t v = 0; v < V; ++v) {
      const double p = std::exp(row[v] - lse[n]);
      const double q = v == targets[n] ? q_floor + (1 - smoothing) : q_floor;
      d_row[v] = static_cast<T>(scale * (p - q));
    }
  }
  // END SOLUTION
}

}  // namespace

// ---- CrossEntropy ---------------------------------------------------------------------------
// logits: (N, V) float, targets: (N) int64 -> loss: () of logits' dtype
// Saves: logits (detached, contiguous: no copy when already so), targets, lse per row (N,
// float64), count, ignore_index and the smoothing. Backward recomputes softmax from logits and
// lse, so no (N, V) probability tensor is allocated by the forward.
struct CrossEntropy final : Node {
  Tensor logits;   // (N, V)
  Tensor targets;  // (N) int64
  Tensor lse;      // (N) float64: log-sum-exp of each row (unset on ignored rows)
  std::int64_t count = 0;  // rows not ignored
  std::int64_t ignore_index = -100;
  double smoothing = 0;
  const char* name() const override { return "CrossEntropy"; }

  static Tensor forward(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, double smoothing) {
    check_float(logits, "cross_entropy");
    SF_EXPECT(logits.dim() == 2 && logits.shape()[1] >= 1,
              "cross_entropy: expected logits of shape (N, V) with V >= 1, got ", logits.shape());
    const std::int64_t N = logits.shape()[0], V = logits.shape()[1];
    SF_EXPECT(targets.dtype() == Dtype::Int64, "cross_entropy: expected int64 targets (class ids), got ",
              dtype_name(targets.dtype()));
    SF_EXPECT(targets.shape() == Shape{N}, "cross_entropy: expected targets of shape (N) = ", Shape{N},
              " for logits of shape ", logits.shape(), ", got ", targets.shape());
    if (!(smoothing >= 0 && smoothing < 1))
      throw std::invalid_argument("cross_entropy: expected label_smoothing in [0, 1), got " + std::to_string(smoothing));

    Tensor lc = contiguous(logits.detach()), tc = contiguous(targets.detach());
    const std::int64_t* pt = tc.data<std::int64_t>();
    std::int64_t count = 0;
    for (std::int64_t n = 0; n < N; ++n) {
      if (pt[n] == ignore_index) continue;
      SF_EXPECT(pt[n] >= 0 && pt[n] < V, "cross_entropy: target ", pt[n], " at position ", n,
                " is not a class id in [0, ", V, ") and not ignore_index ", ignore_index);
      ++count;
    }

    std::vector<double> row_loss(N, 0.0);
    Tensor lse = zeros({N}, Dtype::Float64);
    if (!(fast::kEnabled && fast::cross_entropy(lc, pt, ignore_index, smoothing, row_loss.data(), lse.data<double>())))
      dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
        using T = decltype(tag);
          cross_entropy_forward<T>(row_loss.data(), lse.data<double>(), lc.data<T>(), pt, N, V, ignore_index, smoothing);
      });
    double total = 0;  // summed in row order on one thread: the same result for any thread count
    for (double l : row_loss) total += l;
    Tensor out = scalar_tensor(count > 0 ? total / static_cast<double>(count) : 0.0, logits.dtype());

    if (any_requires_grad({&logits})) {
      auto node = std::make_shared<CrossEntropy>();
      node->logits = lc;
      node->targets = tc;
      node->lse = lse;
      node->count = count;
      node->ignore_index = ignore_index;
      node->smoothing = smoothing;
      connect(node, {&logits, &targets}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t N = logits.shape()[0], V = logits.shape()[1];
    Tensor grad_logits = empty(logits.shape(), logits.dtype());
    const double scale = count > 0 ? grad_output.item() / static_cast<double>(count) : 0.0;
    const std::int64_t* pt = targets.data<std::int64_t>();
    if (fast::kEnabled && fast::cross_entropy_backward(logits, pt, lse.data<double>(), ignore_index, smoothing, scale,
                                                       grad_logits))
      return {grad_logits, Tensor()};
    dispatch_float(logits.dtype(), "cross_entropy backward", [&](auto tag) {
      using T = decltype(tag);
      cross_entropy_backward<T>(grad_logits.data<T>(), logits.data<T>(), pt, lse.data<double>(), N, V, ignore_index,
                                smoothing, scale);
    });
    return {grad_logits, Tensor()};  // targets are class ids: no gradient
  }

  void release_saved() override { logits = targets = lse = Tensor(); }
};

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, double label_smoothing) {
  return CrossEntropy::forward(logits, targets, ignore_index, label_smoothing);
}

}  // namespace sf
