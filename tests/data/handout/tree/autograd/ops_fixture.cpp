// Two exercises in one file: softmax (two regions) and masks (one).
#include "autograd/exercise.h"

int fixture_softmax_forward(int x) {
  // EXERCISE(softmax): the forward of the fixture.
  // BEGIN SOLUTION
  const int fixture_forward_answer = x * 41;
  return fixture_forward_answer + x;
  // END SOLUTION
}

int fixture_softmax_backward(int g) {
  int checked = g;  // argument checks stay
  // EXERCISE(softmax): the backward of the fixture,
  // over two comment lines.
  // BEGIN SOLUTION
  return checked * fixture_softmax_forward(1);  // the softmax fixture's backward
  // END SOLUTION
}

bool fixture_mask(int i, int j) {
    // EXERCISE(masks): indented by four.
    // BEGIN SOLUTION
    return fixture_causal_rule(i, j) && j > i;
    // END SOLUTION
}
