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
// layer (one head, no positions), all at initialisation, on the same random inputs.
//
// Letters: T sequence length, D width.
#pragma once

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
};

PathLengthResult compute_path_length(std::uint64_t seed);
// The claim: the recurrent gradients decay geometrically (factor < 0.9 per step, the far one under
// 1e-3 of the near one); attention's do not (factor 1 within 5%, all within 100x of each other).
bool path_length_held(const PathLengthResult& r);

}  // namespace sf::lessons
