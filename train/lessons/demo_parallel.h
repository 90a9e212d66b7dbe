// demo parallel: why the Transformer trains faster. A recurrent layer computes h_t from h_{t-1},
// so its T positions are T steps one after another, however many cores there are; self-attention
// computes all T positions with a few matrix products whose size grows with T but whose number
// does not. The count that shows it: the longest chain of dependent ops from the output back to
// the input, read off the autograd graph (each op a node, each edge "needs the result of"). The
// wall times of a forward pass are printed beside it, as measured on this machine, not asserted.
//
// Letters: B batch, T sequence length, D width.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct ParallelSettings {
  std::vector<std::int64_t> lengths = {8, 16, 32, 64, 128};
  std::int64_t batch = 16, width = 256;
  int repeats = 3;  // timed forwards per model and length (the median is reported); 0 = no timing
};

struct ParallelRow {
  std::int64_t seq_len = 0;
  std::int64_t lstm_depth = 0, attention_depth = 0;  // longest dependent chain of ops, output to input
  double lstm_ms = 0, attention_ms = 0;              // median forward wall time (0 without timing)
};

struct ParallelResult {
  ParallelSettings settings;
  std::vector<ParallelRow> rows;
};

ParallelResult compute_parallel(const ParallelSettings& settings, std::uint64_t seed);
// The claim: the LSTM's chain grows by at least one op per extra position; attention's is the same
// at every length.
bool parallel_held(const ParallelResult& r);

}  // namespace sf::lessons
