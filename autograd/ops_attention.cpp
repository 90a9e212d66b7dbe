// Exact tiled attention (the online softmax behind FlashAttention) beside the plain one.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width. A "pair" is one
// (b, h): attention runs on each pair separately. A tile is Br query rows by Bc key columns,
// Br = min(block, Tq), Bc = min(block, Tk).
//
// Attention for one pair, with S the (Tq,Tk) scores:
//   S = scale * Q K^T + bias, set to -inf where the mask blocks (mask true = blocked)
//   P = softmax of each row of S    (blocked entries 0; a row with every key blocked all 0)
//   O = P V                         (Tq,Dh)
// attention_naive does exactly this with ops, so S and P exist in full, (B,H,Tq,Tk) each, and
// stay alive for backward: at B = H = 4, T = 2048 that is 256 MB per tensor in float32.
//
// tiled_attention (Dao et al. 2022, "FlashAttention"; Dao 2023, "FlashAttention-2") computes
// the same O, exactly, holding only one (Br,Bc) tile of S at a time. The trick is the online
// softmax (Milakov & Gimelshein 2018): for one query row, walk over the keys in blocks keeping
//   m  the largest score seen so far
//   l  sum over the keys seen of exp(s_j - m)
//   o  sum over the keys seen of exp(s_j - m) v_j          (a Dh vector)
// When a block raises the max from m to m', the sums so far are scaled by exp(-m) and must be
// scaled by exp(-m') instead: multiply l and o by alpha = exp(m - m'), then add the block's
// terms. After the last block O = o / l. These are softmax's own sums taken in another order,
// so the result matches the plain one to rounding.
//
// Backward needs P again. Rather than storing it, forward saves one number per query row,
//   L = m + log(l)    (the row's log-sum-exp, so that P_ij = exp(S_ij - L_i)),
// and backward recomputes S tile by tile from Q and K. With dO = dLoss/dO given, per tile
// (FlashAttention-2, Algorithm 2):
//   P   = exp(S - L)                       the probabilities, recomputed
//   dV += P^T dO                           from O = P V
//   dP  = dO V^T
//   dS  = P ∘ (dP - D),  D_i = sum_d dO_id O_id
//         (softmax's backward is dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), and
//          sum_k P_ik dP_ik = sum_k P_ik (dO_i . v_k) = dO_i . O_i: D needs no (Tq,Tk) tensor)
//   dQ += scale dS K,  dK += scale dS^T Q,  dbias += dS
//
// A band (KeyBand, the ladder's rungs 4 and 5): when which keys a query may see follows from the
// positions alone (causal: j <= i; a sliding window: i - W < j <= i, both shifted by Tk - Tq), no
// mask tensor is read: the tile loops start and stop at the band's edges, so a tile wholly
// outside it is never computed, and score_tile blocks the entries outside it in the tiles that
// straddle an edge. With a window the work per query is O(W) instead of O(Tk).
//
// Fully masked rows: every score is -inf, m stays -inf and l = 0. Forward outputs zeros and
// saves L = -inf; backward then takes P = 0 on that row, so it sends no gradient anywhere
// (the convention of softmax in ops_softmax.cpp and of scaled_dot_product_attention).
//
// Memory and threads: OpenMP over pairs. Each thread holds two (Br,Bc) tiles, one (Br,Dh)
// accumulator, and O(Tq) numbers per row; the saved tensors are q, k, v, out and L: O(B·H·T).
// The tile products go to cblas_sgemm / cblas_dgemm (small tiles run single-threaded in
// OpenBLAS, so calling it from several OpenMP threads does not oversubscribe the cores).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/exercise.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// ---- checks -------------------------------------------------------------------------------

// Throws unless t (a mask or a bias) broadcasts to the scores' shape (B,H,Tq,Tk).
void check_broadcasts_to_scores(const Tensor& t, const Shape& scores, const char* what, const char* op) {
  bool ok = t.dim() <= static_cast<std::int64_t>(scores.size());
  for (std::int64_t i = 1; ok && i <= t.dim(); ++i) {
    const std::int64_t have = t.shape()[t.dim() - i], want = scores[scores.size() - i];
    ok = have == 1 || have == want;
  }
  if (!ok)
    throw std::invalid_argument(std::string(op) + ": " + what + " of shape " + shape_str(t.shape()) +
                                " does not broadcast to the scores' shape (B,H,Tq,Tk) = " + shape_str(scores));
}

// Checks q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh) of one float dtype, a bool mask and a bias of q's
// dtype (each optional) broadcastable to the scores. -> the scores' shape (B,H,Tq,Tk).
Shape check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                             const Tensor& bias, const char* op) {
  check_float(q, op);
  check_same_dtype(q, k, op);
  check_same_dtype(q, v, op);
  if (q.dim() != 4 || k.dim() != 4 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(1) != k.size(1) ||
      q.size(3) != k.size(3))
    throw std::invalid_argument(std::string(op) + ": expected q (B,H,Tq,Dh) and k, v (B,H,Tk,Dh) with the same B, "
                                "H, Dh, got q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
                                shape_str(v.shape()));
  const Shape scores{q.size(0), q.size(1), q.size(2), k.size(2)};
  if (mask.defined()) {
    if (mask.dtype() != Dtype::Bool)
      throw std::invalid_argument(std::string(op) + ": expected a bool mask (true = blocked), got " +
                                  dtype_name(mask.dtype()) + " of shape " + shape_str(mask.shape()));
    check_broadcasts_to_scores(mask, scores, "mask", op);
  }
  if (bias.defined()) {
    check_same_dtype(q, bias, op);
    check_broadcasts_to_scores(bias, scores, "bias", op);
  }
  return scores;
}

// ---- what the kernels read ------------------------------------------------------------------

// The inputs of one call. q, k, v are contiguous; the mask and bias are read in place through
// their strides seen as (B,H,Tq,Tk), 0 along the dims they broadcast over, so a (Tq,Tk) causal
// mask or an (H,Tq,Tk) bias is never expanded to (B,H,Tq,Tk).
template <class T>
struct AttentionArgs {
  std::int64_t B = 0, H = 0, Tq = 0, Tk = 0, Dh = 0;
  std::int64_t block = 1;
  T scale = 1;
  const T* q = nullptr;         // (B,H,Tq,Dh)
  const T* k = nullptr;         // (B,H,Tk,Dh)
  const T* v = nullptr;         // (B,H,Tk,Dh)
  const bool* mask = nullptr;   // null: no mask
  Shape mask_strides;           // (B,H,Tq,Tk) strides of the mask
  const T* bias = nullptr;      // null: no bias
  Shape bias_strides;           // (B,H,Tq,Tk) strides of the bias

  // Keys a query sees by position alone, with no mask tensor (the ladder's rungs 4 and 5): causal,
  // key j only up to the query's own position i + Tk - Tq; with a window W > 0, only the W keys
  // ending there. Tiles wholly outside are never visited.
  KeyBand band;
  // Query row i sees keys first_key(i) .. last_key(i) (none when last < first).
  std::int64_t first_key(std::int64_t i) const {
    return band.window > 0 ? std::max<std::int64_t>(0, i + Tk - Tq - band.window + 1) : 0;
  }
  std::int64_t last_key(std::int64_t i) const { return band.causal ? std::min(Tk - 1, i + Tk - Tq) : Tk - 1; }
  // Whether any query of rows i0 .. i0+rows-1 sees any key of cols j0 .. j0+cols-1.
  bool tile_visible(std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols) const {
    return last_key(i0 + rows - 1) >= j0 && first_key(i0) <= j0 + cols - 1;
  }

  std::int64_t br() const { return std::min(block, Tq); }  // rows of a tile
  std::int64_t bc() const { return std::min(block, Tk); }  // columns of a tile
  // Row i0 of pair (b, h)'s (Tq,Dh) queries, (Tk,Dh) keys, (Tk,Dh) values.
  const T* q_rows(std::int64_t b, std::int64_t h, std::int64_t i0) const { return q + ((b * H + h) * Tq + i0) * Dh; }
  const T* k_rows(std::int64_t b, std::int64_t h, std::int64_t j0) const { return k + ((b * H + h) * Tk + j0) * Dh; }
  const T* v_rows(std::int64_t b, std::int64_t h, std::int64_t j0) const { return v + ((b * H + h) * Tk + j0) * Dh; }
};

// q, k, v: contiguous; mask, bias: any layout or undefined.
template <class T>
AttentionArgs<T> make_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                           double scale, std::int64_t block, KeyBand band) {
  AttentionArgs<T> a;
  a.band = band;
  a.B = q.size(0);
  a.H = q.size(1);
  a.Tq = q.size(2);
  a.Tk = k.size(2);
  a.Dh = q.size(3);
  a.block = block;
  a.scale = static_cast<T>(scale);
  a.q = q.data<T>();
  a.k = k.data<T>();
  a.v = v.data<T>();
  const Shape scores{a.B, a.H, a.Tq, a.Tk};
  if (mask.defined()) {
    a.mask = mask.data<bool>();
    a.mask_strides = broadcast_strides(mask, scores);
  }
  if (bias.defined()) {
    a.bias = bias.data<T>();
    a.bias_strides = broadcast_strides(bias, scores);
  }
  return a;
}

// ---- tile helpers ---------------------------------------------------------------------------

// c (m,n) = alpha op(a) op(b) + beta c, all row-major, op(x) = x^T when trans_x: op(a) is
// (m,k), op(b) is (k,n). One overload per dtype. The leading dimensions are clamped to 1 so an
// empty dim (Dh = 0) still passes BLAS's argument checks.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(std::max<std::int64_t>(lda, 1)), b, static_cast<int>(std::max<std::int64_t>(ldb, 1)),
              beta, c, static_cast<int>(std::max<std::int64_t>(ldc, 1)));
}
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(std::max<std::int64_t>(lda, 1)), b, static_cast<int>(std::max<std::int64_t>(ldb, 1)),
              beta, c, static_cast<int>(std::max<std::int64_t>(ldc, 1)));
}

// s (rows,cols), row-major: the scores of queries i0.. against keys j0.. of pair (b, h),
//   s[r][c] = scale * q_(i0+r) . k_(j0+c) + bias(i0+r, j0+c),  or -inf where the mask blocks.
template <class T>
void score_tile(const AttentionArgs<T>& a, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows,
                std::int64_t j0, std::int64_t cols, T* s) {
  // (rows, Dh) @ (cols, Dh)^T -> (rows, cols)
  gemm(false, true, rows, cols, a.Dh, a.scale, a.q_rows(b, h, i0), a.Dh, a.k_rows(b, h, j0), a.Dh, T(0), s, cols);
  if (a.bias) {
    const Shape& st = a.bias_strides;
    const T* bias = a.bias + b * st[0] + h * st[1] + i0 * st[2] + j0 * st[3];  // element (i0, j0)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) s[r * cols + c] += bias[r * st[2] + c * st[3]];
  }
  if (a.mask) {
    const Shape& st = a.mask_strides;
    const bool* mask = a.mask + b * st[0] + h * st[1] + i0 * st[2] + j0 * st[3];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        if (mask[r * st[2] + c * st[3]]) s[r * cols + c] = -std::numeric_limits<T>::infinity();
  }  if (a.band.causal || a.band.window > 0)  // the position rule: keys outside the band blocked
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t first = a.first_key(i0 + r), last = a.last_key(i0 + r);
      for (std::int64_t c = 0; c < cols; ++c)
        if (j0 + c < first || j0 + c > last) s[r * cols + c] = -std::numeric_limits<T>::infinity();
    }
}

// ---- scratch accounting (tiled_attention_peak_scratch_bytes) ---------------------------------

std::atomic<std::int64_t> g_peak_scratch_bytes{0};

void record_scratch(std::int64_t bytes) {
  std::int64_t seen = g_peak_scratch_bytes.load();
  while (bytes > seen && !g_peak_scratch_bytes.compare_exchange_weak(seen, bytes)) {
  }
}

// Below this many score-tile element-operations (Tq·Tk·(Dh + 16) over all pairs, 16 standing
// for the exp and the masking) a call runs on one thread: starting OpenMP threads costs more
// than it saves on small inputs (gradient checks, decoding one token), badly so on a busy machine.
constexpr std::int64_t kParallelWork = std::int64_t(1) << 20;

// Threads for `items` independent items of `work` in total: OpenMP's count, no more than there
// are items, and one for small work.
int thread_count(std::int64_t items, std::int64_t work) {
  if (work < kParallelWork) return 1;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(omp_get_max_threads(), items)));
}

// The work measure of thread_count for one call.
template <class T>
std::int64_t attention_work(const AttentionArgs<T>& a) {
  return a.B * a.H * a.Tq * a.Tk * (a.Dh + 16);
}

// ---- forward ---------------------------------------------------------------------------------

// One thread's scratch in forward.
template <class T>
struct ForwardScratch {
  std::vector<T> s;       // (Br,Bc): a tile of scores S, overwritten in place by exp(S - m)
  std::vector<T> acc;     // (Br,Dh): o, the output rows before dividing by l
  std::vector<T> m;       // (Br): running max of each row
  std::vector<double> l;  // (Br): running sum of each row (double: a row sums Tk terms)
  explicit ForwardScratch(const AttentionArgs<T>& a)
      : s(a.br() * a.bc()), acc(a.br() * a.Dh), m(a.br()), l(a.br()) {}
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((s.size() + acc.size() + m.size()) * sizeof(T) + l.size() * sizeof(double));
  }
};

// Pair (b, h): out (Tq,Dh) = softmax(S) V and lse (Tq) = L, one block of query rows at a time,
// streaming over the keys one block at a time (the online softmax, see the top of the file).
template <class T>
void forward_pair(const AttentionArgs<T>& a, std::int64_t b, std::int64_t h, ForwardScratch<T>& w, T* out, T* lse) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i0 = 0; i0 < a.Tq; i0 += a.block) {
    const std::int64_t rows = std::min(a.block, a.Tq - i0);
    std::fill_n(w.m.begin(), rows, kNegInf);
    std::fill_n(w.l.begin(), rows, 0.0);
    std::fill_n(w.acc.begin(), rows * a.Dh, T(0));
    // the key blocks these rows see: all of them, or (a band) those from the first row's first
    // key to the last row's last key
    const std::int64_t j_begin = a.first_key(i0) / a.block * a.block, j_end = a.last_key(i0 + rows - 1) + 1;
    for (std::int64_t j0 = j_begin; j0 < j_end; j0 += a.block) {
      const std::int64_t cols = std::min(a.block, a.Tk - j0);
      T* s = w.s.data();
      score_tile(a, b, h, i0, rows, j0, cols, s);  // S: (rows, cols)
      for (std::int64_t r = 0; r < rows; ++r) {
        T* s_row = s + r * cols;
        const T m_new = std::max(w.m[r], *std::max_element(s_row, s_row + cols));
        if (m_new == kNegInf) {  // every key so far is blocked: this block adds nothing
          std::fill_n(s_row, cols, T(0));
          continue;
        }
        // alpha rescales what was summed under the old max (0 when there was none: m = -inf).
        const T alpha = std::exp(w.m[r] - m_new);
        double block_sum = 0;
        if (!(fast::kEnabled && fast::exp_shifted(s_row, cols, m_new, &block_sum)))
          for (std::int64_t c = 0; c < cols; ++c) {
            s_row[c] = std::exp(s_row[c] - m_new);  // exp(S - m'): blocked keys give exp(-inf) = 0
            block_sum += s_row[c];
          }
        w.l[r] = alpha * w.l[r] + block_sum;
        T* acc_row = w.acc.data() + r * a.Dh;
        for (std::int64_t d = 0; d < a.Dh; ++d) acc_row[d] *= alpha;
        w.m[r] = m_new;
      }
      // o += exp(S - m') V_j: (rows, cols) @ (cols, Dh) -> (rows, Dh)
      gemm(false, false, rows, a.Dh, cols, T(1), s, cols, a.v_rows(b, h, j0), a.Dh, T(1), w.acc.data(), a.Dh);
    }
    // O = o / l and L = m + log(l); a row that met no unblocked key (l = 0) gives 0 and -inf.
    for (std::int64_t r = 0; r < rows; ++r) {
      T* out_row = out + (i0 + r) * a.Dh;
      const T* acc_row = w.acc.data() + r * a.Dh;
      if (w.l[r] == 0) {
        std::fill_n(out_row, a.Dh, T(0));
        lse[i0 + r] = kNegInf;
        continue;
      }
      const double inv_l = 1.0 / w.l[r];
      for (std::int64_t d = 0; d < a.Dh; ++d) out_row[d] = static_cast<T>(acc_row[d] * inv_l);
      lse[i0 + r] = static_cast<T>(w.m[r] + std::log(w.l[r]));
    }
  }
}

// out: (B,H,Tq,Dh), lse: (B,H,Tq), both contiguous; one pair per loop iteration.
template <class T>
void tiled_forward_kernel(const AttentionArgs<T>& a, T* out, T* lse) {
  const std::int64_t pairs = a.B * a.H;
  const int threads = thread_count(pairs, attention_work(a));
  std::vector<ForwardScratch<T>> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(a);
  record_scratch(threads * scratch[0].bytes());
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (std::int64_t p = 0; p < pairs; ++p)
    forward_pair(a, p / a.H, p % a.H, scratch[omp_get_thread_num()], out + p * a.Tq * a.Dh, lse + p * a.Tq);
}

// ---- backward --------------------------------------------------------------------------------

// What backward reads besides the inputs, and where it writes. The gradients are zero-filled,
// contiguous, and null when not needed.
template <class T>
struct BackwardArgs {
  const T* out = nullptr;          // (B,H,Tq,Dh): O
  const T* grad_output = nullptr;  // (B,H,Tq,Dh): dO
  const T* lse = nullptr;          // (B,H,Tq): L
  T* dq = nullptr;                 // (B,H,Tq,Dh)
  T* dk = nullptr;                 // (B,H,Tk,Dh)
  T* dv = nullptr;                 // (B,H,Tk,Dh)
  T* dbias = nullptr;              // the bias's shape (padded to 4 dims)
  Shape dbias_strides;             // dbias seen as (B,H,Tq,Tk): 0 along the dims the bias broadcasts over
  bool needs_ds() const { return dq || dk || dbias; }
};

// One thread's scratch in backward.
template <class T>
struct BackwardScratch {
  std::vector<T> p;   // (Br,Bc): a tile of S, overwritten by P = exp(S - L)
  std::vector<T> ds;  // (Br,Bc): dP = dO V^T, overwritten by dS = P ∘ (dP - D)
  std::vector<T> d;   // (Tq): D_i = rowsum(dO ∘ O) of the current pair
  explicit BackwardScratch(const AttentionArgs<T>& a) : p(a.br() * a.bc()), ds(a.br() * a.bc()), d(a.Tq) {}
  std::int64_t bytes() const { return static_cast<std::int64_t>((p.size() + ds.size() + d.size()) * sizeof(T)); }
};

// Pair (b, h), as FlashAttention-2's Algorithm 2: the outer loop walks the key blocks j (whose
// dK_j and dV_j it accumulates), the inner loop the query blocks i, recomputing each tile of S.
// The pair's slices of dq, dk, dv belong to this thread alone, so it adds into them directly.
template <class T>
void backward_pair(const AttentionArgs<T>& a, const BackwardArgs<T>& bwd, std::int64_t b, std::int64_t h,
                   BackwardScratch<T>& w) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const std::int64_t pair = b * a.H + h;
  const T* out = bwd.out + pair * a.Tq * a.Dh;                  // (Tq,Dh)
  const T* grad_output = bwd.grad_output + pair * a.Tq * a.Dh;  // (Tq,Dh): dO
  const T* lse = bwd.lse + pair * a.Tq;                         // (Tq)

  // D_i = dO_i . O_i, which equals sum_j P_ij dP_ij (see the top of the file).
  for (std::int64_t i = 0; i < a.Tq; ++i) {
    double dot = 0;
    for (std::int64_t d = 0; d < a.Dh; ++d) dot += static_cast<double>(grad_output[i * a.Dh + d]) * out[i * a.Dh + d];
    w.d[i] = static_cast<T>(dot);
  }

  for (std::int64_t j0 = 0; j0 < a.Tk; j0 += a.block) {
    const std::int64_t cols = std::min(a.block, a.Tk - j0);
    const T* k_j = a.k_rows(b, h, j0);                                // (cols,Dh)
    const T* v_j = a.v_rows(b, h, j0);                                // (cols,Dh)
    T* dk_j = bwd.dk ? bwd.dk + (pair * a.Tk + j0) * a.Dh : nullptr;  // (cols,Dh)
    T* dv_j = bwd.dv ? bwd.dv + (pair * a.Tk + j0) * a.Dh : nullptr;  // (cols,Dh)
    for (std::int64_t i0 = 0; i0 < a.Tq; i0 += a.block) {
      const std::int64_t rows = std::min(a.block, a.Tq - i0);
      if (!a.tile_visible(i0, rows, j0, cols)) continue;  // outside the band: P = 0 on the whole tile
      const T* q_i = a.q_rows(b, h, i0);                                // (rows,Dh)
      const T* grad_output_i = grad_output + i0 * a.Dh;                 // (rows,Dh): dO_i
      T* dq_i = bwd.dq ? bwd.dq + (pair * a.Tq + i0) * a.Dh : nullptr;  // (rows,Dh)

      // P = exp(S - L), the probabilities of forward, recomputed. L = -inf marks a fully masked
      // row: P = 0 there (exp(-inf - -inf) would be NaN), so nothing flows back from it.
      T* p = w.p.data();
      score_tile(a, b, h, i0, rows, j0, cols, p);
      for (std::int64_t r = 0; r < rows; ++r) {
        T* p_row = p + r * cols;
        const T L = lse[i0 + r];
        if (L == kNegInf) {
          std::fill_n(p_row, cols, T(0));
          continue;
        }
        if (!(fast::kEnabled && fast::exp_shifted(p_row, cols, L, nullptr)))
          for (std::int64_t c = 0; c < cols; ++c) p_row[c] = std::exp(p_row[c] - L);
      }

      // dV_j += P^T dO_i: (cols, rows) @ (rows, Dh)
      if (dv_j) gemm(true, false, cols, a.Dh, rows, T(1), p, cols, grad_output_i, a.Dh, T(1), dv_j, a.Dh);
      if (!bwd.needs_ds()) continue;

      // dP = dO_i V_j^T: (rows, Dh) @ (Dh, cols), then dS = P ∘ (dP - D_i) in place.
      T* ds = w.ds.data();
      gemm(false, true, rows, cols, a.Dh, T(1), grad_output_i, a.Dh, v_j, a.Dh, T(0), ds, cols);
      // BEGIN RELATED(softmax): softmax's backward, one tile at a time
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) ds[r * cols + c] = p[r * cols + c] * (ds[r * cols + c] - w.d[i0 + r]);
      // HANDOUT INSTEAD:
      // sf::exercise::not_implemented("softmax", __func__, __FILE__);  // hidden with the softmax exercise
      // END RELATED

      // dbias += dS, summed into the element each score read its bias from.
      if (bwd.dbias) {
        const Shape& st = bwd.dbias_strides;
        T* dbias = bwd.dbias + b * st[0] + h * st[1] + i0 * st[2] + j0 * st[3];
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < cols; ++c) dbias[r * st[2] + c * st[3]] += ds[r * cols + c];
      }
      // dQ_i += scale dS K_j: (rows, cols) @ (cols, Dh)
      if (dq_i) gemm(false, false, rows, a.Dh, cols, a.scale, ds, cols, k_j, a.Dh, T(1), dq_i, a.Dh);
      // dK_j += scale dS^T Q_i: (cols, rows) @ (rows, Dh)
      if (dk_j) gemm(true, false, cols, a.Dh, rows, a.scale, ds, cols, q_i, a.Dh, T(1), dk_j, a.Dh);
    }
  }
}

// Fills the gradients in bwd. Pairs run in parallel, except that pairs adding into the same
// slice of dbias (a bias broadcast over b or h) form one group and run in one thread, in order:
// no two threads ever write the same element, and the sums do not depend on the thread count.
template <class T>
void tiled_backward_kernel(const AttentionArgs<T>& a, const BackwardArgs<T>& bwd) {
  const bool bias_shared_over_b = bwd.dbias && bwd.dbias_strides[0] == 0;
  const bool bias_shared_over_h = bwd.dbias && bwd.dbias_strides[1] == 0;
  const std::int64_t groups_b = bias_shared_over_b ? 1 : a.B, groups_h = bias_shared_over_h ? 1 : a.H;
  const std::int64_t groups = groups_b * groups_h;
  const int threads = thread_count(groups, attention_work(a));
  std::vector<BackwardScratch<T>> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(a);
  record_scratch(threads * scratch[0].bytes());
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (std::int64_t group = 0; group < groups; ++group) {
    const std::int64_t gb = group / groups_h, gh = group % groups_h;
    const std::int64_t b_begin = bias_shared_over_b ? 0 : gb, b_end = bias_shared_over_b ? a.B : gb + 1;
    const std::int64_t h_begin = bias_shared_over_h ? 0 : gh, h_end = bias_shared_over_h ? a.H : gh + 1;
    for (std::int64_t b = b_begin; b < b_end; ++b)
      for (std::int64_t h = h_begin; h < h_end; ++h) backward_pair(a, bwd, b, h, scratch[omp_get_thread_num()]);
  }
}

// The bias's shape with leading 1s up to 4 dims, e.g. (H,Tq,Tk) -> (1,H,Tq,Tk).
Shape padded_to_4d(const Shape& s) {
  Shape out(4 - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

// ---- TiledAttention: out = softmax(scale q k^T + bias, masked) v, one tile at a time ---------
// q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh), mask: bool broadcastable to (B,H,Tq,Tk) or undefined,
// bias: broadcastable to (B,H,Tq,Tk) or undefined -> out: (B,H,Tq,Dh).
// Saves: q, k, v (contiguous), the mask and bias as given, out and L (B,H,Tq): O(B·H·T), no
// (Tq,Tk) tensor. Backward: recomputes the scores tile by tile (see the top of the file) and
// returns dq, dk, dv, dbias (dbias summed over the dims the bias was broadcast along).
struct TiledAttention final : Node {
  Tensor q, k, v;    // (B,H,Tq,Dh), (B,H,Tk,Dh), (B,H,Tk,Dh): contiguous, detached
  Tensor mask;       // bool, as given; undefined for none
  Tensor bias;       // as given, detached; undefined for none
  Tensor out;        // (B,H,Tq,Dh): O, for D = rowsum(dO ∘ O)
  Tensor lse;        // (B,H,Tq): L = m + log(l) of each query row; -inf for a fully masked row
  double scale = 1;
  std::int64_t block = 64;
  KeyBand band;
  const char* name() const override { return "TiledAttention"; }

  static Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                        double scale, std::int64_t block, KeyBand band) {
    const Shape scores = check_attention_inputs(q, k, v, mask, bias, "tiled_attention");
    if (block < 1)
      throw std::invalid_argument("tiled_attention: expected block >= 1 (rows and columns of a score tile), got " +
                                  std::to_string(block));
    if (band.window < 0)
      throw std::invalid_argument("tiled_attention: expected a window >= 0 (0 = none), got " + std::to_string(band.window));
    if (band.window > 0) band.causal = true;  // a window of W keys ends at the query's own position
    const Tensor qc = contiguous(q.detach()), kc = contiguous(k.detach()), vc = contiguous(v.detach());
    const Tensor bias_d = bias.defined() ? bias.detach() : Tensor();
    Tensor out = empty(q.shape(), q.dtype());
    Tensor lse = empty({scores[0], scores[1], scores[2]}, q.dtype());
    dispatch_float(q.dtype(), "tiled_attention", [&](auto tag) {
      using T = decltype(tag);
      tiled_forward_kernel<T>(make_args<T>(qc, kc, vc, mask, bias_d, scale, block, band), out.data<T>(), lse.data<T>());
    });
    if (any_requires_grad({&q, &k, &v, &bias})) {
      auto node = std::make_shared<TiledAttention>();
      node->q = qc;
      node->k = kc;
      node->v = vc;
      node->mask = mask;
      node->bias = bias_d;
      node->out = out.detach();
      node->lse = lse;
      node->scale = scale;
      node->block = block;
      node->band = band;
      connect(node, {&q, &k, &v, &bias}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Tensor grad_output_c = contiguous(grad_output);  // dO
    Tensor dq = needs_input_grad(0) ? zeros(q.shape(), q.dtype()) : Tensor();
    Tensor dk = needs_input_grad(1) ? zeros(k.shape(), k.dtype()) : Tensor();
    Tensor dv = needs_input_grad(2) ? zeros(v.shape(), v.dtype()) : Tensor();
    Tensor dbias = needs_input_grad(3) ? zeros(padded_to_4d(bias.shape()), bias.dtype()) : Tensor();
    dispatch_float(q.dtype(), "tiled_attention backward", [&](auto tag) {
      using T = decltype(tag);
      BackwardArgs<T> bwd;
      bwd.out = out.data<T>();
      bwd.grad_output = grad_output_c.data<T>();
      bwd.lse = lse.data<T>();
      if (dq.defined()) bwd.dq = dq.data<T>();
      if (dk.defined()) bwd.dk = dk.data<T>();
      if (dv.defined()) bwd.dv = dv.data<T>();
      if (dbias.defined()) {
        bwd.dbias = dbias.data<T>();
        bwd.dbias_strides = broadcast_strides(dbias, {q.size(0), q.size(1), q.size(2), k.size(2)});
      }
      tiled_backward_kernel<T>(make_args<T>(q, k, v, mask, bias, scale, block, band), bwd);
    });
    return {dq, dk, dv, dbias.defined() ? reshape(dbias, bias.shape()) : Tensor()};
  }

  void release_saved() override {
    q = k = v = mask = bias = out = lse = Tensor();
  }
};

// q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh) -> (B,H,Tq,Dh)
Tensor tiled_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                       double scale, std::int64_t block, KeyBand band) {
  return TiledAttention::forward(q, k, v, mask, bias, scale, block, band);
}

// The reference beside the tiled op: the same math composed from ops, each with its own
// backward. q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh) -> (B,H,Tq,Dh)
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                       double scale) {
  check_attention_inputs(q, k, v, mask, bias, "attention_naive");
  // EXERCISE(scaled_dot_product): softmax(q k^T * scale + bias, blocked -> -inf) v, as in nn/attention.cpp.
  // BEGIN SOLUTION
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), scale);  // (B,H,Tq,Tk)
  if (bias.defined()) scores = add(scores, bias);
  if (mask.defined()) scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  return matmul(softmax(scores, -1), v);  // (B,H,Tq,Tk) @ (B,H,Tk,Dh); an all -inf row gives 0
  // END SOLUTION
}

std::int64_t tiled_attention_peak_scratch_bytes(bool reset) {
  return reset ? g_peak_scratch_bytes.exchange(0) : g_peak_scratch_bytes.load();
}

}  // namespace sf
