#include "nn/dropout.h"

#include <sstream>
#include <stdexcept>

#include "autograd/ops.h"

namespace sf::nn {

Dropout::Dropout(double p_, Generator& g) : p(p_), gen(&g) {
  if (!(p >= 0 && p < 1)) {  // written so that NaN fails too
    std::ostringstream msg;
    msg << "Dropout: p must be a probability in [0, 1), got " << p;
    throw std::invalid_argument(msg.str());
  }
}

// x: any shape -> same shape
Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p == 0) return run_forward_hooks(x);
  return run_forward_hooks(sf::dropout(x, p, *gen));  // x * keep / (1 - p), keep ~ Bernoulli(1 - p)
}

}  // namespace sf::nn
