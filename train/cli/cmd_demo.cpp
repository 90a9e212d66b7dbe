// `scratchformer demo`: y = sum(relu(x @ w)) on a tiny input, forward and backward, printed step
// by step: tensors and autograd at work, with nothing else around them.
#include <iostream>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "train/cli/commands.h"

namespace sf::cli {

namespace {

int run_demo() {
  Generator gen(0);
  Tensor x = randn({2, 3}, gen);                   // (B=2, D=3)
  Tensor w = randn({3, 4}, gen).requires_grad_();  // (D=3, F=4)
  w.set_name("w");
  Tensor h = matmul(x, w);   // (2, 4)
  Tensor y = sum(relu(h));   // ()
  std::cout << "x = " << x << "\n\nw = " << w << "\n\nh = x @ w = " << h << "\n\ny = sum(relu(h)) = " << y << "\n\n";
  y.backward();
  std::cout << "dy/dw = " << w.grad() << "\n";
  return 0;
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("demo", "Print a tiny forward and backward pass (tensors and autograd at work)");
  return {cmd, run_demo};
}

}  // namespace sf::cli
