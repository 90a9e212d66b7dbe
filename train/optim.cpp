#include "train/optim.h"

#include <cmath>
#include <stdexcept>

#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf::train {

namespace {
// The gradient of p as a contiguous tensor of p's dtype, or undefined.
Tensor grad_of(const Tensor& p) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (g.dtype() != p.dtype() || g.shape() != p.shape())
    throw std::logic_error("optimizer: gradient of shape " + shape_str(g.shape()) + " for a parameter of shape " +
                           shape_str(p.shape()));
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

void Adam::step(double lr) {
  NoGradGuard no_grad;
  ++steps_;
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    dispatch_float(p.dtype(), "Adam::step", [&](auto tag) {
      using T = decltype(tag);
      T* pp = p.data<T>();
      const T* pg = g.data<T>();
      T* pm = m_[i].data<T>();
      T* pv = v_[i].data<T>();
      const std::int64_t n = p.numel();
      const double b1 = beta1_, b2 = beta2_, eps = eps_, wd = weight_decay_;
      const bool decoupled = decoupled_;
#pragma omp parallel for if (n > 65536)
      for (std::int64_t k = 0; k < n; ++k) {
        double grad = pg[k];
        if (wd != 0 && !decoupled) grad += wd * pp[k];  // Adam's L2 penalty goes into the gradient
        const double m = b1 * pm[k] + (1 - b1) * grad;
        const double v = b2 * pv[k] + (1 - b2) * grad * grad;
        pm[k] = static_cast<T>(m);
        pv[k] = static_cast<T>(v);
        double w = pp[k];
        if (wd != 0 && decoupled) w -= lr * wd * w;  // AdamW: decay the weight directly
        w -= lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
        pp[k] = static_cast<T>(w);
      }
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

double clip_grad_norm(const NamedParameters& params, double max_norm) {
  NoGradGuard no_grad;
  double total = 0;
  for (const auto& [_, p] : params) {
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.data<T>();
      double s = 0;
      for (std::int64_t k = 0, n = g.numel(); k < n; ++k) s += static_cast<double>(pg[k]) * pg[k];
      total += s;
    });
  }
  const double norm = std::sqrt(total);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) scale_grads(params, max_norm / (norm + 1e-6));
  return norm;
}

void scale_grads(const NamedParameters& params, double factor) {
  NoGradGuard no_grad;
  for (const auto& [_, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous() || g.impl()->storage.use_count() > 1) {
      // the gradient may share memory with another tensor: replace it instead of writing into it
      p.impl()->grad = mul(g, factor).impl_ptr();
      continue;
    }
    dispatch_float(g.dtype(), "scale_grads", [&](auto tag) {
      using T = decltype(tag);
      T* pg = g.data<T>();
      for (std::int64_t k = 0, n = g.numel(); k < n; ++k) pg[k] = static_cast<T>(pg[k] * factor);
    });
  }
}

}  // namespace sf::train
