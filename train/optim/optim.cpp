#include "train/optim/optim.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/check.h"
#include "autograd/fast.h"
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

// One Adam update of one parameter tensor, element by element (n elements, all contiguous):
//   g <- g + wd * w                 (Adam's L2 penalty, when not decoupled)
//   m <- b1 m + (1 - b1) g          first moment
//   v <- b2 v + (1 - b2) g^2        second moment
//   w <- w - lr wd w                (AdamW's decay, when decoupled)
//   w <- w - step_size * m / (sqrt(v) / sqrt(bc2) + eps),   step_size = lr / bc1
// with the bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t. This is PyTorch's arrangement of
// the formula, in the parameter's own dtype (float32 for a float32 model, as PyTorch does).
template <class T>
void adam_update(T* w, const T* grad, T* m_state, T* v_state, std::int64_t n, const fast::AdamStep& c) {
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2), eps = static_cast<T>(c.eps);
  const T one_minus_b1 = static_cast<T>(1 - c.beta1), one_minus_b2 = static_cast<T>(1 - c.beta2);
  const T l2 = c.decoupled ? T(0) : static_cast<T>(c.weight_decay);
  const T keep = c.decoupled ? static_cast<T>(1 - c.lr * c.weight_decay) : T(1);  // AdamW: w *= 1 - lr wd
  const T step_size = static_cast<T>(c.lr / c.bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1 / std::sqrt(c.bias_correction2));
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
  const fast::AdamStep c{lr, beta1_, beta2_, eps_, weight_decay_, decoupled_,
                         1.0 - std::pow(beta1_, static_cast<double>(steps_)),
                         1.0 - std::pow(beta2_, static_cast<double>(steps_))};
  std::vector<std::size_t> updated;  // params_[i] with a gradient
  std::vector<Tensor> grads;         // their gradients, contiguous
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (Tensor g = grad_of(params_[i].second); g.defined()) updated.push_back(i), grads.push_back(std::move(g));
  if (fast::kEnabled && adam_fast(updated, grads, c)) return;
  for (std::size_t j = 0; j < updated.size(); ++j) {
    const Tensor& p = params_[updated[j]].second;
    dispatch_float(p.dtype(), "Adam::step", [&](auto tag) {
      using T = decltype(tag);
      adam_update<T>(p.data<T>(), grads[j].data<T>(), m_[updated[j]].data<T>(), v_[updated[j]].data<T>(), p.numel(), c);
    });
  }
}

// The same update through the fast kernel (fast::adam: one region for all the tensors), when
// every parameter is float32.
bool Adam::adam_fast(const std::vector<std::size_t>& updated, const std::vector<Tensor>& grads,
                     const fast::AdamStep& c) {
  std::vector<fast::AdamTensors> tensors;
  for (std::size_t j = 0; j < updated.size(); ++j) {
    const Tensor& p = params_[updated[j]].second;
    if (p.dtype() != Dtype::Float32) return false;
    tensors.push_back({p.data<float>(), grads[j].data<float>(), m_[updated[j]].data<float>(),
                       v_[updated[j]].data<float>(), p.numel()});
  }
  return fast::adam(tensors, c);
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

// sum_k x[k]^2 in double for each tensor (contiguous, float32 or float64; `who` names the caller
// in the error for any other dtype), in tensor order.
std::vector<double> sums_of_squares(const std::vector<Tensor>& tensors, const char* who) {
  std::vector<double> sums(tensors.size(), 0.0);
  if (fast::kEnabled && fast::sums_of_squares(tensors, sums)) return sums;
  for (std::size_t t = 0; t < tensors.size(); ++t)
    dispatch_float(tensors[t].dtype(), who, [&](auto tag) {
      using T = decltype(tag);
      const T* x = tensors[t].data<T>();
      for (std::int64_t k = 0, n = tensors[t].numel(); k < n; ++k) sums[t] += static_cast<double>(x[k]) * x[k];
    });
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

// Every gradient multiplied by factor, in place (or replaced, where it may share memory).
void scale_grads(const NamedParameters& params, double factor) {
  NoGradGuard no_grad;
  std::vector<Tensor> in_place;
  for (const auto& [_, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous() || g.impl()->storage.use_count() > 1) {
      // the gradient may share memory with another tensor: replace it instead of writing into it
      p.impl()->grad = mul(g, factor).impl_ptr();
      continue;
    }
    dispatch_float(g.dtype(), "scale_grads", [](auto) {});  // only float tensors have gradients
    in_place.push_back(std::move(g));
  }
  if (fast::kEnabled && fast::scale(in_place, factor)) return;
  for (const Tensor& g : in_place)
    dispatch_float(g.dtype(), "scale_grads", [&](auto tag) {
      using T = decltype(tag);
      T* pg = g.data<T>();
      for (std::int64_t k = 0, n = g.numel(); k < n; ++k) pg[k] *= static_cast<T>(factor);
    });
}

}  // namespace sf::train
