// The element-wise part of one recurrent step, fused: the LSTM cell's new state, its output, and
// the GRU cell, each with its forward and backward written out unit by unit.
//
// Letters: B batch (rows), H hidden width (units per row). The gate blocks sit side by side along
// the last dim in PyTorch's order (torch.nn.LSTM, torch.nn.GRU): one row of LSTM gates is
// [i | f | g | o], 4H numbers, so unit u reads row[u], row[H + u], row[2H + u], row[3H + u].
// The gates are pre-activations: a recurrent layer makes them with linear() (x W_ih^T + b_ih for
// every step at once, h W_hh^T + b_hh once per step); these ops do everything after the products.
//
// σ(x) = 1 / (1 + e^-x) is the logistic sigmoid, σ'(x) = σ(x) (1 - σ(x)), tanh'(x) = 1 - tanh²(x).
//
// LSTM, one step, as two ops (a layer carries c to the next step and passes h up):
//   c = σ(f) ⊙ c_prev + σ(i) ⊙ tanh(g)                                     lstm_cell_state
//   h = σ(o) ⊙ tanh(c)                                                      lstm_cell_output
// Backward of the state, with dc = dL/dc (its grad_output), per unit:
//   dL/di      = dc * tanh(g) * σ(i) (1 - σ(i))     dc/di      = tanh(g) σ'(i)
//   dL/df      = dc * c_prev * σ(f) (1 - σ(f))      dc/df      = c_prev σ'(f)
//   dL/dg      = dc * σ(i) * (1 - tanh²(g))         dc/dg      = σ(i) tanh'(g)
//   dL/dc_prev = dc * σ(f)                          dc/dc_prev = σ(f)
//   dL/do      = 0                                  (c does not depend on o)
// Backward of the output, with dh = dL/dh, per unit:
//   dL/do      = dh * tanh(c) * σ(o) (1 - σ(o))     dh/do = tanh(c) σ'(o)
//   dL/dc      = dh * σ(o) * (1 - tanh²(c))         dh/dc = σ(o) tanh'(c)
//   dL/di = dL/df = dL/dg = 0                       (h does not depend on i, f, g)
// Over time, c's gradient has two paths: from h at the same step (lstm_cell_output) and from the
// next step's state (its dL/dc_prev). The engine adds them up (backpropagation through time).
//
// GRU, one step: gx = x W_ih^T + b_ih and gh = h_prev W_hh^T + b_hh, each [r | z | n]:
//   r = σ(gx_r + gh_r)                     reset gate
//   z = σ(gx_z + gh_z)                     update gate
//   n = tanh(gx_n + r ⊙ gh_n)              candidate: r scales only the recurrent part (PyTorch)
//   h = (1 - z) ⊙ n + z ⊙ h_prev
// Backward, with dh = dL/dh, per unit, walking those lines upwards:
//   dL/dh_prev = dh * z                                               dh/dh_prev = z
//   dL/dz      = dh * (h_prev - n)                                    dh/dz = h_prev - n
//   dL/dn      = dh * (1 - z)                                         dh/dn = 1 - z
//   dL/dgx_n   = dL/dn * (1 - n²)                                     through n's tanh
//   dL/dgh_n   = dL/dgx_n * r                                         dn's argument is gx_n + r gh_n
//   dL/dr      = dL/dgx_n * gh_n
//   dL/dgx_r   = dL/dgh_r = dL/dr * r (1 - r)                         through r's σ
//   dL/dgx_z   = dL/dgh_z = dL/dz * z (1 - z)                         through z's σ
//
// The choices this file makes:
// - Fused: composed from narrow, sigmoid, tanh, mul and add, one LSTM step records 13 nodes, most
//   of them keeping a (B, H) tensor for backward; fused it records two.
// - Each op saves its inputs, not its activations, and backward recomputes σ and tanh from them (a
//   few exp per unit). The inputs are held anyway: c is the next step's c_prev, and the gates feed
//   both LSTM ops.
// - Everything is computed in the tensors' dtype (float32 or float64): a unit is a handful of
//   operations with no long sums, so float32 loses nothing worth a double accumulator.
// tests/test_recurrent_ops.cpp checks all three against the composed formulas, values and
// gradients, and an LSTM and a GRU unrolled over five steps with gradcheck.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/check.h"
#include "autograd/exercise.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// σ(x) = 1 / (1 + e^-x), the same formula as Sigmoid::value (ops_unary.cpp).
template <class T>
T logistic(T x) {
  return 1 / (1 + std::exp(-x));
}

// Checks one step's gates against its state: state (B, H) and gates (B, k H), both float of one
// dtype. k is the number of gate blocks (4 for the LSTM, 3 for the GRU).
void check_gates_and_state(const char* op, const Tensor& gates, const char* gates_name, const Tensor& state,
                           const char* state_name, std::int64_t k) {
  check_float(gates, op);
  check_same_dtype(gates, state, op);
  SF_EXPECT(state.dim() == 2, op, ": expected ", state_name, " of shape (B, H), got ", state_name, " of shape ",
            state.shape());
  SF_EXPECT(gates.dim() == 2, op, ": expected ", gates_name, " of shape (B, ", k, "H), got ", gates_name,
            " of shape ", gates.shape());
  const std::int64_t B = state.size(0), H = state.size(1);
  SF_EXPECT(gates.size(0) == B, op, ": ", gates_name, " of shape ", gates.shape(), " and ", state_name, " of shape ",
            state.shape(), " differ in batch size B (", gates.size(0), " vs ", B, ")");
  SF_EXPECT(gates.size(1) == k * H, op, ": expected ", gates_name, " of shape (B, ", k, "H) = ", Shape{B, k * H},
            " for ", state_name, " of shape (B, H) = ", state.shape(), ", got ", gates_name, " of shape ",
            gates.shape());
}

}  // namespace

// ---- LSTMCellState: c = σ(f) ⊙ c_prev + σ(i) ⊙ tanh(g) ---------------------------------------
// gates: (B, 4H) = [i | f | g | o], c_prev: (B, H) -> c: (B, H)
// Saves: gates and c_prev (contiguous, detached).
struct LSTMCellState final : Node {
  Tensor gates;   // (B, 4H)
  Tensor c_prev;  // (B, H)
  const char* name() const override { return "LSTMCellState"; }

  // One unit: the pre-activations i, f, g and the old state -> the new state.
  template <class T>
  static T value(T i, T f, T g, T c_prev) {
    return logistic(f) * c_prev + logistic(i) * std::tanh(g);
  }

  // One unit's gradients dL/di, dL/df, dL/dg, dL/dc_prev, given dc = dL/dc there.
  template <class T>
  struct Grads {
    T i, f, g, c_prev;
  };
  template <class T>
  static Grads<T> grads(T i, T f, T g, T c_prev, T dc) {
    // EXERCISE(lstm_cell): one unit's {dL/di, dL/df, dL/dg, dL/dc_prev} of c = σ(f) c_prev + σ(i) tanh(g),
    // given dc = dL/dc, with the derivatives at the top of this file (logistic(x) is σ(x)).
    // BEGIN SOLUTION
    const T sig_i = logistic(i), sig_f = logistic(f), tanh_g = std::tanh(g);
    return {dc * tanh_g * sig_i * (1 - sig_i),   // dc/di = tanh(g) σ'(i)
            dc * c_prev * sig_f * (1 - sig_f),   // dc/df = c_prev σ'(f)
            dc * sig_i * (1 - tanh_g * tanh_g),  // dc/dg = σ(i) tanh'(g)
            dc * sig_f};                         // dc/dc_prev = σ(f)
    // END SOLUTION
  }

  // gates: (B, 4H), c_prev: (B, H) -> c: (B, H); all contiguous.
  template <class T>
  static void forward_kernel(const T* gates, const T* c_prev, T* c, std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 4 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* row = gates + b * 4 * H;  // [i | f | g | o]
      for (std::int64_t u = 0; u < H; ++u)
        c[b * H + u] = value(row[u], row[H + u], row[2 * H + u], c_prev[b * H + u]);
    }
  }

  // grad_output (dL/dc), c_prev: (B, H), gates: (B, 4H) -> grad_gates: (B, 4H), its o block 0, and
  // grad_c_prev: (B, H); either may be null (not wanted). All contiguous.
  template <class T>
  static void backward_kernel(const T* grad_output, const T* gates, const T* c_prev, T* grad_gates, T* grad_c_prev,
                              std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 4 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* row = gates + b * 4 * H;
      for (std::int64_t u = 0; u < H; ++u) {
        const Grads<T> d = grads(row[u], row[H + u], row[2 * H + u], c_prev[b * H + u], grad_output[b * H + u]);
        if (grad_gates) {
          T* grad_row = grad_gates + b * 4 * H;
          grad_row[u] = d.i;
          grad_row[H + u] = d.f;
          grad_row[2 * H + u] = d.g;
          grad_row[3 * H + u] = 0;  // c does not depend on o
        }
        if (grad_c_prev) grad_c_prev[b * H + u] = d.c_prev;
      }
    }
  }

  static Tensor forward(const Tensor& gates, const Tensor& c_prev) {
    check_gates_and_state("lstm_cell_state", gates, "gates", c_prev, "c_prev", 4);
    const std::int64_t B = c_prev.size(0), H = c_prev.size(1);
    Tensor gates_c = contiguous(gates.detach()), c_prev_c = contiguous(c_prev.detach());
    Tensor c = empty({B, H}, gates.dtype());
    dispatch_float(gates.dtype(), "lstm_cell_state", [&](auto tag) {
      using T = decltype(tag);
      forward_kernel<T>(gates_c.data<T>(), c_prev_c.data<T>(), c.data<T>(), B, H);
    });
    if (any_requires_grad({&gates, &c_prev})) {
      auto node = std::make_shared<LSTMCellState>();
      node->gates = gates_c;
      node->c_prev = c_prev_c;
      connect(node, {&gates, &c_prev}, c);
    }
    return c;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t B = c_prev.size(0), H = c_prev.size(1);
    Tensor grad_output_c = contiguous(grad_output);
    Tensor grad_gates = needs_input_grad(0) ? empty(gates.shape(), gates.dtype()) : Tensor();
    Tensor grad_c_prev = needs_input_grad(1) ? empty(c_prev.shape(), c_prev.dtype()) : Tensor();
    dispatch_float(gates.dtype(), "lstm_cell_state backward", [&](auto tag) {
      using T = decltype(tag);
      backward_kernel<T>(grad_output_c.data<T>(), gates.data<T>(), c_prev.data<T>(),
                         grad_gates.defined() ? grad_gates.data<T>() : nullptr,
                         grad_c_prev.defined() ? grad_c_prev.data<T>() : nullptr, B, H);
    });
    return {grad_gates, grad_c_prev};
  }

  void release_saved() override { gates = c_prev = Tensor(); }
};

// ---- LSTMCellOutput: h = σ(o) ⊙ tanh(c) ----------------------------------------------------------
// gates: (B, 4H) = [i | f | g | o], c: (B, H) -> h: (B, H)
// Saves: gates and c (contiguous, detached).
struct LSTMCellOutput final : Node {
  Tensor gates;  // (B, 4H)
  Tensor c;      // (B, H)
  const char* name() const override { return "LSTMCellOutput"; }

  // One unit: the pre-activation o and the state c -> the output.
  template <class T>
  static T value(T o, T c) {
    return logistic(o) * std::tanh(c);
  }

  // One unit's gradients dL/do and dL/dc, given dh = dL/dh there.
  template <class T>
  struct Grads {
    T o, c;
  };
  template <class T>
  static Grads<T> grads(T o, T c, T dh) {
    // EXERCISE(lstm_cell): one unit's {dL/do, dL/dc} of h = σ(o) tanh(c), given dh = dL/dh, with the
    // derivatives at the top of this file.
    // BEGIN SOLUTION
    const T sig_o = logistic(o), tanh_c = std::tanh(c);
    return {dh * tanh_c * sig_o * (1 - sig_o),   // dh/do = tanh(c) σ'(o)
            dh * sig_o * (1 - tanh_c * tanh_c)};  // dh/dc = σ(o) tanh'(c)
    // END SOLUTION
  }

  // gates: (B, 4H), c: (B, H) -> h: (B, H); all contiguous.
  template <class T>
  static void forward_kernel(const T* gates, const T* c, T* h, std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 4 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* o = gates + b * 4 * H + 3 * H;  // the row's o block
      for (std::int64_t u = 0; u < H; ++u) h[b * H + u] = value(o[u], c[b * H + u]);
    }
  }

  // grad_output (dL/dh), c: (B, H), gates: (B, 4H) -> grad_gates: (B, 4H), 0 but for its o block,
  // and grad_c: (B, H); either may be null (not wanted). All contiguous.
  template <class T>
  static void backward_kernel(const T* grad_output, const T* gates, const T* c, T* grad_gates, T* grad_c,
                              std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 4 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* o = gates + b * 4 * H + 3 * H;
      T* grad_row = grad_gates ? grad_gates + b * 4 * H : nullptr;
      if (grad_row)
        for (std::int64_t k = 0; k < 3 * H; ++k) grad_row[k] = 0;  // h does not depend on i, f, g
      for (std::int64_t u = 0; u < H; ++u) {
        const Grads<T> d = grads(o[u], c[b * H + u], grad_output[b * H + u]);
        if (grad_row) grad_row[3 * H + u] = d.o;
        if (grad_c) grad_c[b * H + u] = d.c;
      }
    }
  }

  static Tensor forward(const Tensor& gates, const Tensor& c) {
    check_gates_and_state("lstm_cell_output", gates, "gates", c, "c", 4);
    const std::int64_t B = c.size(0), H = c.size(1);
    Tensor gates_c = contiguous(gates.detach()), c_c = contiguous(c.detach());
    Tensor h = empty({B, H}, gates.dtype());
    dispatch_float(gates.dtype(), "lstm_cell_output", [&](auto tag) {
      using T = decltype(tag);
      forward_kernel<T>(gates_c.data<T>(), c_c.data<T>(), h.data<T>(), B, H);
    });
    if (any_requires_grad({&gates, &c})) {
      auto node = std::make_shared<LSTMCellOutput>();
      node->gates = gates_c;
      node->c = c_c;
      connect(node, {&gates, &c}, h);
    }
    return h;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t B = c.size(0), H = c.size(1);
    Tensor grad_output_c = contiguous(grad_output);
    Tensor grad_gates = needs_input_grad(0) ? empty(gates.shape(), gates.dtype()) : Tensor();
    Tensor grad_c = needs_input_grad(1) ? empty(c.shape(), c.dtype()) : Tensor();
    dispatch_float(gates.dtype(), "lstm_cell_output backward", [&](auto tag) {
      using T = decltype(tag);
      backward_kernel<T>(grad_output_c.data<T>(), gates.data<T>(), c.data<T>(),
                         grad_gates.defined() ? grad_gates.data<T>() : nullptr,
                         grad_c.defined() ? grad_c.data<T>() : nullptr, B, H);
    });
    return {grad_gates, grad_c};
  }

  void release_saved() override { gates = c = Tensor(); }
};

// ---- GRUCell: h = (1 - z) ⊙ n + z ⊙ h_prev -----------------------------------------------------
// gx, gh: (B, 3H) = [r | z | n], h_prev: (B, H) -> h: (B, H)
// Saves: gx, gh and h_prev (contiguous, detached).
struct GRUCell final : Node {
  Tensor gx;      // (B, 3H)
  Tensor gh;      // (B, 3H)
  Tensor h_prev;  // (B, H)
  const char* name() const override { return "GRUCell"; }

  // One unit: the input and recurrent pre-activations of r, z, n and the old state -> the new state.
  template <class T>
  static T value(T gx_r, T gx_z, T gx_n, T gh_r, T gh_z, T gh_n, T h_prev) {
    const T r = logistic(gx_r + gh_r);  // reset gate
    const T z = logistic(gx_z + gh_z);  // update gate
    const T n = std::tanh(gx_n + r * gh_n);
    return (1 - z) * n + z * h_prev;
  }

  // One unit's gradients, given dh = dL/dh there: r, z, n are those of gx (dL/dgx_r, dL/dgx_z,
  // dL/dgx_n); gh's are the same for r and z (gx_r + gh_r enter the σ as one sum) and gh_n below.
  template <class T>
  struct Grads {
    T r, z, n, gh_n, h_prev;
  };
  template <class T>
  static Grads<T> grads(T gx_r, T gx_z, T gx_n, T gh_r, T gh_z, T gh_n, T h_prev, T dh) {
    const T r = logistic(gx_r + gh_r), z = logistic(gx_z + gh_z), n = std::tanh(gx_n + r * gh_n);
    const T d_gx_n = dh * (1 - z) * (1 - n * n);       // dh/dn = 1 - z, then n's tanh
    const T d_gx_r = d_gx_n * gh_n * r * (1 - r);      // d(r gh_n)/dr = gh_n, then r's σ
    const T d_gx_z = dh * (h_prev - n) * z * (1 - z);  // dh/dz = h_prev - n, then z's σ
    return {d_gx_r, d_gx_z, d_gx_n,
            d_gx_n * r,  // d(r gh_n)/dgh_n = r
            dh * z};     // dh/dh_prev = z
  }

  // gx, gh: (B, 3H), h_prev: (B, H) -> h: (B, H); all contiguous.
  template <class T>
  static void forward_kernel(const T* gx, const T* gh, const T* h_prev, T* h, std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 3 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* x_row = gx + b * 3 * H;  // [r | z | n]
      const T* h_row = gh + b * 3 * H;
      for (std::int64_t u = 0; u < H; ++u)
        h[b * H + u] = value(x_row[u], x_row[H + u], x_row[2 * H + u], h_row[u], h_row[H + u], h_row[2 * H + u],
                             h_prev[b * H + u]);
    }
  }

  // grad_output (dL/dh), h_prev: (B, H), gx, gh: (B, 3H) -> grad_gx, grad_gh: (B, 3H) and
  // grad_h_prev: (B, H); each may be null (not wanted). All contiguous.
  template <class T>
  static void backward_kernel(const T* grad_output, const T* gx, const T* gh, const T* h_prev, T* grad_gx, T* grad_gh,
                              T* grad_h_prev, std::int64_t B, std::int64_t H) {
#pragma omp parallel for if (B * 3 * H > kParallelMinElements)
    for (std::int64_t b = 0; b < B; ++b) {
      const T* x_row = gx + b * 3 * H;
      const T* h_row = gh + b * 3 * H;
      for (std::int64_t u = 0; u < H; ++u) {
        const std::int64_t e = b * H + u;
        const Grads<T> d = grads(x_row[u], x_row[H + u], x_row[2 * H + u], h_row[u], h_row[H + u], h_row[2 * H + u],
                                 h_prev[e], grad_output[e]);
        if (grad_gx) {
          T* grad_row = grad_gx + b * 3 * H;
          grad_row[u] = d.r;
          grad_row[H + u] = d.z;
          grad_row[2 * H + u] = d.n;
        }
        if (grad_gh) {
          T* grad_row = grad_gh + b * 3 * H;
          grad_row[u] = d.r;
          grad_row[H + u] = d.z;
          grad_row[2 * H + u] = d.gh_n;
        }
        if (grad_h_prev) grad_h_prev[e] = d.h_prev;
      }
    }
  }

  static Tensor forward(const Tensor& gx, const Tensor& gh, const Tensor& h_prev) {
    check_gates_and_state("gru_cell", gx, "gx", h_prev, "h_prev", 3);
    check_gates_and_state("gru_cell", gh, "gh", h_prev, "h_prev", 3);
    const std::int64_t B = h_prev.size(0), H = h_prev.size(1);
    Tensor gx_c = contiguous(gx.detach()), gh_c = contiguous(gh.detach()), h_prev_c = contiguous(h_prev.detach());
    Tensor h = empty({B, H}, h_prev.dtype());
    dispatch_float(h_prev.dtype(), "gru_cell", [&](auto tag) {
      using T = decltype(tag);
      forward_kernel<T>(gx_c.data<T>(), gh_c.data<T>(), h_prev_c.data<T>(), h.data<T>(), B, H);
    });
    if (any_requires_grad({&gx, &gh, &h_prev})) {
      auto node = std::make_shared<GRUCell>();
      node->gx = gx_c;
      node->gh = gh_c;
      node->h_prev = h_prev_c;
      connect(node, {&gx, &gh, &h_prev}, h);
    }
    return h;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t B = h_prev.size(0), H = h_prev.size(1);
    Tensor grad_output_c = contiguous(grad_output);
    Tensor grad_gx = needs_input_grad(0) ? empty(gx.shape(), gx.dtype()) : Tensor();
    Tensor grad_gh = needs_input_grad(1) ? empty(gh.shape(), gh.dtype()) : Tensor();
    Tensor grad_h_prev = needs_input_grad(2) ? empty(h_prev.shape(), h_prev.dtype()) : Tensor();
    dispatch_float(h_prev.dtype(), "gru_cell backward", [&](auto tag) {
      using T = decltype(tag);
      backward_kernel<T>(grad_output_c.data<T>(), gx.data<T>(), gh.data<T>(), h_prev.data<T>(),
                         grad_gx.defined() ? grad_gx.data<T>() : nullptr,
                         grad_gh.defined() ? grad_gh.data<T>() : nullptr,
                         grad_h_prev.defined() ? grad_h_prev.data<T>() : nullptr, B, H);
    });
    return {grad_gx, grad_gh, grad_h_prev};
  }

  void release_saved() override { gx = gh = h_prev = Tensor(); }
};

Tensor lstm_cell_state(const Tensor& gates, const Tensor& c_prev) { return LSTMCellState::forward(gates, c_prev); }
Tensor lstm_cell_output(const Tensor& gates, const Tensor& c) { return LSTMCellOutput::forward(gates, c); }
Tensor gru_cell(const Tensor& gx, const Tensor& gh, const Tensor& h_prev) { return GRUCell::forward(gx, gh, h_prev); }

}  // namespace sf
