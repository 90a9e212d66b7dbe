// Dropout: during training, zero each element with probability p and scale the survivors by
// 1/(1-p), so the expected value is unchanged; at evaluation time (eval()) it is the identity.
//
// The random mask comes from a Generator owned by the caller (the model), so a run is
// reproducible from its seeds. The module keeps a pointer: the generator must outlive it.
#pragma once

#include "autograd/generator.h"
#include "nn/module.h"

namespace sf::nn {

class Dropout : public Module {
 public:
  // p: drop probability in [0, 1) (0 disables dropout). No parameters.
  Dropout(double p, Generator& gen);
  const char* type_name() const override { return "Dropout"; }

  // x: any shape -> same shape. Identity when !is_training() or p == 0.
  Tensor forward(const Tensor& x) const;

  double p;
  Generator* gen;  // not owned
};

}  // namespace sf::nn
