// Optimizers: Adam / AdamW and SGD (with momentum), and gradient-norm clipping.
//
// Each step runs under NoGradGuard and updates the parameters in place, one fused loop per
// parameter tensor. State (Adam's moments, SGD's momentum buffers, the step count) is exposed
// by name so checkpoints can save and restore it exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/fast.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace sf::train {

using nn::NamedParameters;

class Optimizer {
 public:
  explicit Optimizer(NamedParameters params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;

  // One update with learning rate lr, from the gradients now in each parameter's .grad
  // (a parameter without a gradient is left alone).
  virtual void step(double lr) = 0;
  void zero_grad();

  // Everything needed to resume bit-exactly: tensors by name, plus the step count.
  virtual std::map<std::string, Tensor> state() const = 0;
  virtual void load_state(const std::map<std::string, Tensor>& state) = 0;
  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t s) { steps_ = s; }

  const NamedParameters& params() const { return params_; }

 protected:
  NamedParameters params_;
  std::int64_t steps_ = 0;
};

// Adam (Kingma & Ba) with bias correction; with decoupled weight decay it is AdamW
// (Loshchilov & Hutter): p -= lr * wd * p before the Adam update.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
class Adam : public Optimizer {
 public:
  Adam(NamedParameters params, double beta1 = 0.9, double beta2 = 0.98, double eps = 1e-9,
       double weight_decay = 0.0, bool decoupled = false);
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  void step(double lr) override;
  std::map<std::string, Tensor> state() const override;  // "adam.m.<param>", "adam.v.<param>"
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  bool adam_fast(const std::vector<std::size_t>& updated, const std::vector<Tensor>& grads, const fast::AdamStep& c);
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  std::vector<Tensor> m_, v_;  // same shapes and dtypes as the parameters
};

// SGD with optional momentum (PyTorch's form: buf = mu buf + g; p -= lr buf) and L2 weight decay.
class SGD : public Optimizer {
 public:
  SGD(NamedParameters params, double momentum = 0.0, double weight_decay = 0.0);
  const char* name() const override { return "SGD"; }
  void step(double lr) override;
  std::map<std::string, Tensor> state() const override;  // "sgd.momentum.<param>"
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  double momentum_, weight_decay_;
  std::vector<Tensor> buf_;
};

// sum_k t[k]^2 of a float tensor, in double; the same for any thread count.
double squared_norm(const Tensor& t);

// The total L2 norm of all gradients, as if they were one vector. If max_norm > 0 and the norm
// exceeds it, every gradient is scaled by max_norm / norm. Returns the norm before clipping
// (NaN or Inf when a gradient is not finite; then nothing is scaled).
double clip_grad_norm(const NamedParameters& params, double max_norm);

// Multiplies every gradient by `factor` (gradient accumulation averages this way).
void scale_grads(const NamedParameters& params, double factor);

}  // namespace sf::train
