// Printing a tensor the way PyTorch does, plus shape and dtype:
//
//   tensor([[ 0.1000, -2.0000],
//           [ 3.5000,  4.0000]], shape=(2, 2), dtype=float32, grad_fn=<MatMul>)
//
// Tensors with more than kSummarizeAbove elements show kEdgeItems items at each end of every
// dim, with "..." between.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "autograd/node.h"
#include "autograd/tensor.h"

namespace sf {

namespace {
constexpr std::int64_t kSummarizeAbove = 1000;  // as torch's print threshold
constexpr std::int64_t kEdgeItems = 3;

struct Printer {
  const Tensor& t;
  bool summarize;
  bool floating;
  bool use_sci = false;
  int width = 1;

  std::string format(double v) const {
    std::ostringstream os;
    if (t.dtype() == Dtype::Bool) {
      os << (v != 0 ? "True" : "False");
    } else if (!floating) {
      os << static_cast<std::int64_t>(v);
    } else if (std::isnan(v)) {
      os << "nan";
    } else if (std::isinf(v)) {
      os << (v > 0 ? "inf" : "-inf");
    } else if (use_sci) {
      os << std::scientific << std::setprecision(4) << v;
    } else {
      os << std::fixed << std::setprecision(4) << v;
    }
    return os.str();
  }

  // Visits the elements that will be shown.
  template <class F> void visit(Shape& idx, std::size_t d, F&& f) const {
    if (d == t.shape().size()) { f(t.at(idx)); return; }
    const std::int64_t n = t.shape()[d];
    for (std::int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
      idx[d] = i;
      visit(idx, d + 1, f);
    }
  }

  void measure() {
    double max_abs = 0, min_abs = INFINITY;
    Shape idx(t.dim());
    visit(idx, 0, [&](double v) {
      if (std::isfinite(v)) {
        max_abs = std::max(max_abs, std::fabs(v));
        if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
      }
    });
    use_sci = floating && (max_abs >= 1e8 || (min_abs < 1e-4 && min_abs > 0));
    visit(idx, 0, [&](double v) { width = std::max<int>(width, static_cast<int>(format(v).size())); });
  }

  void print(std::ostream& os, Shape& idx, std::size_t d, int indent) const {
    if (d == t.shape().size()) {
      os << std::setw(width) << format(t.at(idx));
      return;
    }
    os << "[";
    const std::int64_t n = t.shape()[d];
    const bool last_dim = d + 1 == t.shape().size();
    for (std::int64_t i = 0; i < n; ++i) {
      if (i > 0) {
        os << ",";
        if (last_dim) os << " ";
        else os << std::string(t.shape().size() - d - 1, '\n') << std::string(indent + d + 1, ' ');
      }
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << "...,";
        if (last_dim) os << " ";
        else os << std::string(t.shape().size() - d - 1, '\n') << std::string(indent + d + 1, ' ');
        i = n - kEdgeItems;
      }
      idx[d] = i;
      print(os, idx, d + 1, indent);
    }
    os << "]";
  }
};
}  // namespace

std::string Tensor::to_string() const {
  if (!impl_) return "tensor(undefined)";
  std::ostringstream os;
  Printer p{*this, numel() > kSummarizeAbove, is_floating(dtype())};
  p.measure();
  os << "tensor(";
  Shape idx(dim());
  p.print(os, idx, 0, 7);
  os << ", shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype());
  if (impl_->grad_fn) os << ", grad_fn=<" << impl_->grad_fn->name() << ">";
  else if (impl_->requires_grad) os << ", requires_grad=True";
  if (!impl_->name.empty()) os << ", name=\"" << impl_->name << "\"";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace sf
