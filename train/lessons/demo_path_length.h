// demo path-length: how far a gradient travels. A recurrent network reaches token 1 from the last
// position through T − 1 steps, each multiplying the gradient by one Jacobian ∂h_t/∂h_{t-1}:
//
//   ∂h_T/∂x_1 = (∂h_T/∂h_{T-1}) (∂h_{T-1}/∂h_{T-2}) ... (∂h_2/∂h_1) (∂h_1/∂x_1)
//
// and when those Jacobians are contractions (a tanh cell with small recurrent weights; an LSTM
// whose forget gate starts near σ(0) = 1/2) the product shrinks geometrically with the distance:
// the vanishing gradient. Self-attention reaches every token in one step, y_T = Σ_i α_Ti x_i W_v,
// so ∂y_T/∂x_i is the same size at distance 1 and at distance T − 1: the path is O(1) long.
//
// The numbers: ‖∂(u · out_T)/∂x_t‖ for one random direction u, at every distance d = T − t, for a
// tanh RNN, an LSTM (one layer, one direction, PyTorch's initialisation) and one self-attention
// layer (one head, no positions), on the same random inputs: at initialisation, and again after
// each model has been trained to need the farthest token (write the first token's numbers into
// the last output; the first token carries a flag the others lack). Training can teach an LSTM
// to keep its forget gate open, and the lecture says so; what it does here is printed as it is.
//
// Letters: T sequence length, D width.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct PathLengthResult {
  std::int64_t seq_len = 0, d_model = 0;
  std::vector<std::int64_t> distance;  // 1 .. T-1
  // ‖∂(u · out_T)/∂x_t‖ at each distance (float64)
  std::vector<double> rnn, lstm, attention;
  // Per step the gradient is multiplied by about this (a least-squares fit of log norm against
  // distance over the whole range): < 1 is geometric decay, 1 none.
  double rnn_factor = 0, lstm_factor = 0, attention_factor = 0;
  // after training (empty when train_steps is 0): the same norms, and each model's final loss
  std::int64_t train_steps = 0;
  std::vector<double> rnn_trained, lstm_trained, attention_trained;
  double rnn_loss = 0, lstm_loss = 0, attention_loss = 0;
};

// The training steps of each model before the second measurement (the demo's; 0 skips training).
constexpr std::int64_t kPathLengthTrainSteps = 300;

PathLengthResult compute_path_length(std::uint64_t seed, std::int64_t train_steps = kPathLengthTrainSteps);
// The claim: at initialisation the recurrent gradients decay geometrically (factor < 0.9 per
// step, the far one under 1e-3 of the near one); attention's do not (factor 1 within 5%, all
// within 100x of each other). After training (when trained): self-attention has learnt the task
// (loss under 0.05; answering 0 scores 0.25) and its largest gradient is the one to the first
// token, read in one step, while the recurrent gradients to it are still under 1e-3 of the
// nearest one's (in the same number of steps neither recurrent model learns the task here).
bool path_length_held(const PathLengthResult& r);

// The numbers as the explorer's Lessons page draws them (demo_report.h); path_length_report is this
// of a fresh run.
Json path_length_json(const PathLengthResult& r);

}  // namespace sf::lessons
