// scratchformer: the command-line program. Subcommands arrive with the training work
// (train, translate, eval, bleu, summary, gradcheck, bench); for now: --help, --version and
// `demo`, a short tour of tensors and autograd.
#include <CLI/CLI.hpp>

#include <iostream>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace {

// y = sum(relu(x @ w)) on a tiny input, printed step by step: what the README's quick demo shows.
int run_demo() {
  using namespace sf;
  Generator gen(0);
  Tensor x = randn({2, 3}, gen);                    // (B=2, D=3)
  Tensor w = randn({3, 4}, gen).requires_grad_();   // (D=3, F=4)
  w.set_name("w");
  Tensor h = matmul(x, w);                          // (2, 4)
  Tensor y = sum(relu(h));                          // ()
  std::cout << "x = " << x << "\n\nw = " << w << "\n\nh = x @ w = " << h << "\n\ny = sum(relu(h)) = " << y
            << "\n\n";
  y.backward();
  std::cout << "dy/dw = " << w.grad() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Scratchformer: a from-scratch C++ Transformer for learning how translation models work"};
  app.set_version_flag("--version", std::string("scratchformer ") + SCRATCHFORMER_VERSION);
  app.require_subcommand(0, 1);
  auto* demo = app.add_subcommand("demo", "Print a tiny forward and backward pass (tensors and autograd at work)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help/version to stdout (exit 0) and errors to stderr; a bad command line exits 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    sf::init_threads();
    if (demo->parsed()) return run_demo();
    std::cout << app.help();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "scratchformer: error: " << e.what() << "\n";
    return 2;
  }
}
