#include "train/optim/optim.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/check.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf::train {

namespace {
// The gradient of p as a contiguous tensor of p's dtype, or undefined.
Tensor grad_of(const Tensor& p) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  SF_CHECK(g.dtype() == p.dtype() && g.shape() == p.shape(), "optimizer: gradient ", dtype_name(g.dtype()), " ",
           g.shape(), " for a parameter ", dtype_name(p.dtype()), " ", p.shape());
  return g.contiguous();
}

void check_contiguous(const NamedParameters& params, const char* who) {
  for (const auto& [name, p] : params)
    if (!p.is_contiguous())
      throw std::invalid_argument(std::string(who) + ": parameter '" + name + "' is not contiguous");
}

Tensor find_state(const std::map<std::string, Tensor>& state, const std::string& key, const Tensor& like) {
  auto it = state.find(key);
  if (it == state.end()) throw std::invalid_argument("optimizer state: missing '" + key + "'");
  if (it->second.shape() != like.shape())
    throw std::invalid_argument("optimizer state: '" + key + "' has shape " + shape_str(it->second.shape()) +
                                ", the parameter " + shape_str(like.shape()));
  Tensor t = zeros_like(like);
  t.copy_(it->second);
  return t;
}
}  // namespace

void Optimizer::zero_grad() {
  for (auto& [_, p] : params_) Tensor(p).zero_grad();
}

// ---------------------------------------------------------------- Adam

Adam::Adam(NamedParameters params, double beta1, double beta2, double eps, double weight_decay, bool decoupled)
    : Optimizer(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay),
      decoupled_(decoupled) {
  check_contiguous(params_, name());
  for (const auto& [_, p] : params_) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
  }
}

namespace {

// The numbers one Adam step shares across all parameter tensors.
struct AdamStepConstants {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false;
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - b1^t, 1 - b2^t
};

// One Adam update of one parameter tensor, element by element (n elements, all contiguous):
//   g <- g + wd * w                 (Adam's L2 penalty, when not decoupled)
//   m <- b1 m + (1 - b1) g          first moment
//   v <- b2 v + (1 - b2) g^2        second moment
//   w <- w - lr wd w                (AdamW's decay, when decoupled)
//   w <- w - step_size * m / (sqrt(v) / sqrt(bc2) + eps),   step_size = lr / bc1
// with the bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t. This is PyTorch's arrangement of
// the formula. It runs in the parameter's own dtype (float32 for a float32 model, as PyTorch
// does), so the compiler can vectorise the loop: 8-16 floats per instruction, sqrt and divide
// included.
// The loop is an orphaned `omp for ... nowait`: called inside Adam::step's one parallel region,
// each thread takes its share of this tensor and goes on to the next tensor without waiting.
// Each element is computed alone, so the result is the same on any number of threads.
template <class T>
void adam_update(T* w, const T* grad, T* m_state, T* v_state, std::int64_t n, const AdamStepConstants& c) {
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2), eps = static_cast<T>(c.eps);
  const T one_minus_b1 = static_cast<T>(1 - c.beta1), one_minus_b2 = static_cast<T>(1 - c.beta2);
  const T l2 = c.decoupled ? T(0) : static_cast<T>(c.weight_decay);
  const T keep = c.decoupled ? static_cast<T>(1 - c.lr * c.weight_decay) : T(1);  // AdamW: w *= 1 - lr wd
  const T step_size = static_cast<T>(c.lr / c.bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1 / std::sqrt(c.bias_correction2));
#pragma omp for simd schedule(static) nowait
  for (std::int64_t k = 0; k < n; ++k) {
    const T g = grad[k] + l2 * w[k];
    const T m = b1 * m_state[k] + one_minus_b1 * g;
    const T v = b2 * v_state[k] + one_minus_b2 * g * g;
    m_state[k] = m;
    v_state[k] = v;
    w[k] = keep * w[k] - step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace

void Adam::step(double lr) {
  NoGradGuard no_grad;
  ++steps_;
  AdamStepConstants c;
  c.lr = lr;
  c.beta1 = beta1_;
  c.beta2 = beta2_;
  c.eps = eps_;
  c.weight_decay = weight_decay_;
  c.decoupled = decoupled_;
  c.bias_correction1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  c.bias_correction2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
  // Every tensor's update in one OpenMP region, the threads sharing each tensor's elements
  // (adam_update). A region per tensor would keep the tensors of at most kParallelMinElements
  // elements -- each 256 x 256 weight of the bench model, a third of its parameters -- on one
  // thread while the others wait.
  struct Update {
    std::size_t i;  // params_[i]
    Tensor grad;
  };
  std::vector<Update> updates;
  std::int64_t elements = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grad_of(params_[i].second);
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "Adam::step", [](auto) {});  // throws here, not inside the region
    elements += g.numel();
    updates.push_back({i, std::move(g)});
  }
#pragma omp parallel if (elements > kParallelMinElements)
  for (const Update& u : updates) {
    const Tensor& p = params_[u.i].second;
    dispatch_float(p.dtype(), "Adam::step", [&](auto tag) {
      using T = decltype(tag);
      adam_update<T>(p.data<T>(), u.grad.data<T>(), m_[u.i].data<T>(), v_[u.i].data<T>(), p.numel(), c);
    });
  }
}

std::map<std::string, Tensor> Adam::state() const {
  std::map<std::string, Tensor> s;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    s["adam.m." + params_[i].first] = m_[i];
    s["adam.v." + params_[i].first] = v_[i];
  }
  return s;
}

void Adam::load_state(const std::map<std::string, Tensor>& state) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    m_[i] = find_state(state, "adam.m." + params_[i].first, params_[i].second);
    v_[i] = find_state(state, "adam.v." + params_[i].first, params_[i].second);
  }
}

// ---------------------------------------------------------------- SGD

SGD::SGD(NamedParameters params, double momentum, double weight_decay)
    : Optimizer(std::move(params)), momentum_(momentum), weight_decay_(weight_decay) {
  check_contiguous(params_, "SGD");
  for (const auto& [_, p] : params_) buf_.push_back(zeros_like(p));
}

void SGD::step(double lr) {
  NoGradGuard no_grad;
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    dispatch_float(p.dtype(), "SGD::step", [&](auto tag) {
      using T = decltype(tag);
      T* pp = p.data<T>();
      const T* pg = g.data<T>();
      T* pb = buf_[i].data<T>();
      const std::int64_t n = p.numel();
      const bool first = steps_ == 1;
      for (std::int64_t k = 0; k < n; ++k) {
        double grad = pg[k] + weight_decay_ * pp[k];
        if (momentum_ != 0) {
          const double b = first ? grad : momentum_ * pb[k] + grad;  // PyTorch: buf starts as g
          pb[k] = static_cast<T>(b);
          grad = b;
        }
        pp[k] = static_cast<T>(pp[k] - lr * grad);
      }
    });
  }
}

std::map<std::string, Tensor> SGD::state() const {
  std::map<std::string, Tensor> s;
  for (std::size_t i = 0; i < params_.size(); ++i) s["sgd.momentum." + params_[i].first] = buf_[i];
  return s;
}

void SGD::load_state(const std::map<std::string, Tensor>& state) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i)
    buf_[i] = find_state(state, "sgd.momentum." + params_[i].first, params_[i].second);
}

// ---------------------------------------------------------------- clipping

namespace {

// Sums of squares are taken in fixed chunks of this many elements (see sums_of_squares).
constexpr std::int64_t kSquaresChunk = 16384;

// sum of x[k]^2 over [begin, end), in double, in SIMD lanes.
template <class T>
double chunk_sum_of_squares(const T* x, std::int64_t begin, std::int64_t end) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t k = begin; k < end; ++k) s += static_cast<double>(x[k]) * static_cast<double>(x[k]);
  return s;
}

// sum_k x[k]^2 in double for each tensor (contiguous, float32 or float64; `who` names the caller
// in the error for any other dtype). Each tensor is cut into fixed chunks of kSquaresChunk, the
// chunks of all the tensors run in one OpenMP loop, and each tensor's chunk sums are added in
// chunk order, so the result is the same for any thread count (it depends only on the sizes).
// The embedding's gradient alone is 2M numbers in the bench model; one loop for all the tensors
// keeps those of at most 4 chunks (a 256 x 256 weight) off a single thread.
std::vector<double> sums_of_squares(const std::vector<Tensor>& tensors, const char* who) {
  struct Chunk {
    std::size_t tensor;  // tensors[tensor]
    std::int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    dispatch_float(tensors[t].dtype(), who, [](auto) {});  // throws here, not inside the loop
    const std::int64_t n = tensors[t].numel();
    for (std::int64_t begin = 0; begin < n; begin += kSquaresChunk)
      chunks.push_back({t, begin, std::min(n, begin + kSquaresChunk)});
  }
  std::vector<double> partial(chunks.size(), 0.0);
  const std::int64_t count = static_cast<std::int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (count > 4)
  for (std::int64_t i = 0; i < count; ++i) {
    const Chunk& ch = chunks[static_cast<std::size_t>(i)];
    const Tensor& x = tensors[ch.tensor];
    partial[static_cast<std::size_t>(i)] = dispatch_float(x.dtype(), who, [&](auto tag) {
      using T = decltype(tag);
      return chunk_sum_of_squares(x.data<T>(), ch.begin, ch.end);
    });
  }
  std::vector<double> sums(tensors.size(), 0.0);
  for (std::size_t i = 0; i < chunks.size(); ++i) sums[chunks[i].tensor] += partial[i];
  return sums;
}

}  // namespace

double squared_norm(const Tensor& t) { return sums_of_squares({t.contiguous()}, "squared_norm")[0]; }

// The sum of every gradient's squared_norm, in tensor order (so the same bits as calling
// squared_norm tensor by tensor), with all the gradients' chunks in one OpenMP loop.
double clip_grad_norm(const NamedParameters& params, double max_norm) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const auto& [_, p] : params)
    if (Tensor g = grad_of(p); g.defined()) grads.push_back(std::move(g));
  double total = 0;
  for (double s : sums_of_squares(grads, "clip_grad_norm")) total += s;
  const double norm = std::sqrt(total);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) scale_grads(params, max_norm / (norm + 1e-6));
  return norm;
}

// Every gradient scaled in place in one OpenMP region, the threads sharing each tensor's
// elements (an orphaned `omp for ... nowait` per tensor, as in Adam::step).
void scale_grads(const NamedParameters& params, double factor) {
  NoGradGuard no_grad;
  std::vector<Tensor> in_place;
  std::int64_t elements = 0;
  for (const auto& [_, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous() || g.impl()->storage.use_count() > 1) {
      // the gradient may share memory with another tensor: replace it instead of writing into it
      p.impl()->grad = mul(g, factor).impl_ptr();
      continue;
    }
    dispatch_float(g.dtype(), "scale_grads", [](auto) {});  // throws here, not inside the region
    elements += g.numel();
    in_place.push_back(std::move(g));
  }
#pragma omp parallel if (elements > kParallelMinElements)
  for (const Tensor& g : in_place) {
    dispatch_float(g.dtype(), "scale_grads", [&](auto tag) {
      using T = decltype(tag);
      T* pg = g.data<T>();
      const std::int64_t n = g.numel();
      const T f = static_cast<T>(factor);
#pragma omp for simd schedule(static) nowait
      for (std::int64_t k = 0; k < n; ++k) pg[k] *= f;
    });
  }
}

}  // namespace sf::train
