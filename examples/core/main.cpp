// The README's "core in five minutes" as a program: the same lines inside main(), and y printed
// the moment it is computed (ops run eagerly, so there is nothing to "run" first).
//
// x @ w is (2,3) @ (3,4) -> (2,4); relu keeps the positive entries; sum adds them into a 0-d y.
// backward fills w.grad() with dy/dw = xᵀ m, m (2,4) = 1 where x @ w > 0, else 0: shape (3,4).
#include <iostream>

#include "autograd/ops.h"
#include "autograd/generator.h"
using namespace sf;

int main() {
  Generator gen(0);                                   // seeded, owned by you
  Tensor x = randn({2, 3}, gen);                      // (B=2, D=3) float32
  Tensor w = randn({3, 4}, gen).requires_grad_();     // a leaf that wants a gradient
  Tensor y = sum(relu(matmul(x, w)));                 // eager: y holds its value now
  std::cout << "y = " << y << "\n";                   // 0-d, made by grad_fn <Sum>
  y.backward();                                       // w.grad() is dL/dw, shape (3, 4)
  std::cout << w.grad() << "\n";                      // printed like PyTorch, with shape and dtype
  return 0;
}
