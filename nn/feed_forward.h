// FeedForward: the position-wise two-layer network in every Transformer layer.
//
// Letters: B batch, T sequence length, D d_model, F d_ff (hidden width, typically 4 D).
//
//   ReLU, GELU:  y = fc2(dropout(act(fc1(x))))                 ("Attention Is All You Need", BERT)
//   SwiGLU:      y = fc2(dropout(silu(gate(x)) * fc1(x)))       (Shazeer 2020, "GLU Variants")
//                silu(z) = z * sigmoid(z)
//
// SwiGLU has a third D->F projection, so at equal d_ff it has 1.5x the parameters; the paper
// (and LLaMA) shrink d_ff to about 2/3 of 4D to compensate. That choice belongs to the config.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autograd/generator.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace sf::nn {

enum class Activation { ReLU, GELU, SwiGLU };

// "relu" | "gelu" | "swiglu" -> Activation; any other name throws, listing the valid ones.
Activation parse_activation(const std::string& name);
// Activation -> "relu" | "gelu" | "swiglu"
const char* activation_name(Activation act);

class FeedForward : public Module {
 public:
  // init_gen initialises the Linear weights; dropout_gen draws the dropout masks (must outlive
  // the module). dropout: probability on the hidden activations (0 disables it).
  FeedForward(std::int64_t d_model, std::int64_t d_ff, Activation act, double dropout, Generator& init_gen,
              Generator& dropout_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "FeedForward"; }

  // x: (..., D) -> (..., D)
  Tensor forward(const Tensor& x) const;

  std::int64_t d_model, d_ff;
  Activation activation;
  std::shared_ptr<Linear> fc1;       // D -> F (the "up" projection)
  std::shared_ptr<Linear> gate;      // D -> F, SwiGLU only (null otherwise)
  std::shared_ptr<Linear> fc2;       // F -> D (the "down" projection)
  std::shared_ptr<Dropout> dropout;  // on the hidden activations, (..., F)
};

}  // namespace sf::nn
