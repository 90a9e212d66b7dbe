// Indexing and masking: index_select, embedding, masked_fill, where, eq/ne, dropout.
// Values against plain loops, gradient checks (repeated indices, padding rows, broadcast masks,
// a fixed dropout mask) and the error messages a student sees.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/dropout_mask.h"
#include "test_util.h"

using namespace sf;
using Catch::Matchers::Contains;

// ---------------------------------------------------------------- index_select

TEST_CASE("index_select picks slices along a dim", "[index]") {
  Generator gen(21);
  Tensor x = randn({3, 4, 2}, gen, Dtype::Float64);
  const std::vector<std::int64_t> picks{2, 0, 2};
  Tensor index = from_vector(picks, {3});
  Tensor y = index_select(x, 1, index);
  REQUIRE(y.shape() == Shape{3, 3, 2});
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t k = 0; k < 3; ++k)
      for (std::int64_t c = 0; c < 2; ++c) REQUIRE(y.at({a, k, c}) == x.at({a, picks[k], c}));
  // along the last dim (negative), of a non-contiguous view
  Tensor xt = x.transpose(0, 2);  // (2, 4, 3)
  Tensor z = index_select(xt, -1, from_vector<std::int64_t>({1, 1}, {2}));
  REQUIRE(z.shape() == Shape{2, 4, 2});
  for (std::int64_t c = 0; c < 2; ++c)
    for (std::int64_t b = 0; b < 4; ++b) REQUIRE(z.at({c, b, 1}) == x.at({1, b, c}));
  // int64 tensors can be gathered too (no gradient)
  Tensor ids = from_vector<std::int64_t>({10, 11, 12, 13}, {4});
  REQUIRE(index_select(ids, 0, from_vector<std::int64_t>({3, 0}, {2})).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{13, 10});
}

TEST_CASE("index_select gradcheck with repeated indices", "[index][grad]") {
  Generator gen(22);
  Tensor x = test::grad_input({4, 3}, gen);
  Tensor rows = from_vector<std::int64_t>({2, 0, 2, 2}, {4});  // row 2 three times, rows 1 and 3 never
  Tensor cols = from_vector<std::int64_t>({1, 1, 0}, {3});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, rows); }, {x});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], 1, cols); }, {x});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0].transpose(0, 1), 1, rows); },
                          {x});
  // scatter-add by hand: with an all-ones upstream, row 2 receives 3, rows 1 and 3 nothing
  sum(index_select(x, 0, rows)).backward();
  for (std::int64_t j = 0; j < 3; ++j) {
    REQUIRE(x.grad().at({0, j}) == 1);
    REQUIRE(x.grad().at({1, j}) == 0);
    REQUIRE(x.grad().at({2, j}) == 3);
    REQUIRE(x.grad().at({3, j}) == 0);
  }
}

TEST_CASE("index_select rejects a bad index", "[index]") {
  Tensor x = zeros({3, 4}, Dtype::Float64);
  REQUIRE_THROWS_WITH(index_select(x, 1, from_vector<std::int64_t>({0, 4}, {2})),
                      Contains("index_select") && Contains("index value 4") && Contains("size 4"));
  REQUIRE_THROWS_WITH(index_select(x, 0, from_vector<std::int64_t>({-1}, {1})), Contains("index value -1"));
  REQUIRE_THROWS_WITH(index_select(x, 0, from_vector<double>({0.0}, {1})), Contains("1-D int64 index"));
}

// ---------------------------------------------------------------- embedding

TEST_CASE("embedding looks up rows", "[embedding]") {
  Generator gen(23);
  Tensor weight = randn({5, 3}, gen, Dtype::Float64);  // V = 5, D = 3
  const std::vector<std::int64_t> id_values{4, 0, 4, 2, 1, 3};
  Tensor ids = from_vector(id_values, {2, 3});
  Tensor out = embedding(weight, ids);
  REQUIRE(out.shape() == Shape{2, 3, 3});
  for (std::int64_t p = 0; p < 6; ++p)
    for (std::int64_t j = 0; j < 3; ++j) REQUIRE(out.at({p / 3, p % 3, j}) == weight.at({id_values[p], j}));
}

TEST_CASE("embedding gradcheck with and without padding_idx", "[embedding][grad]") {
  Generator gen(24);
  Tensor weight = test::grad_input({5, 3}, gen);
  const std::vector<std::int64_t> id_values{1, 2, 1, 4, 2, 1};  // repeats; row 0 and 3 unused
  Tensor ids = from_vector(id_values, {2, 3});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], ids); }, {weight});
  // With padding_idx = 2 the forward still reads row 2, so its finite differences are not zero
  // while its gradient is zero by design: the gradcheck varies the other rows only (rows 0-1
  // and 3-4 are inputs, row 2 a constant) and the padding row is checked exactly below.
  Tensor head = test::grad_input({2, 3}, gen), tail = test::grad_input({2, 3}, gen);
  Tensor pad_row = randn({1, 3}, gen, Dtype::Float64);
  test::require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return embedding(cat({in[0], pad_row, in[1]}, 0), ids, /*padding_idx=*/2);
      },
      {head, tail});

  // The padding row's gradient is exactly zero; every other row is the scatter-sum of g.
  Tensor g = randn({2, 3, 3}, gen, Dtype::Float64);
  embedding(weight, ids, /*padding_idx=*/2).backward(g);
  Tensor expected = zeros({5, 3}, Dtype::Float64);
  for (std::int64_t p = 0; p < 6; ++p) {
    if (id_values[p] == 2) continue;
    for (std::int64_t j = 0; j < 3; ++j)
      expected.set({id_values[p], j}, expected.at({id_values[p], j}) + g.at({p / 3, p % 3, j}));
  }
  for (std::int64_t j = 0; j < 3; ++j) REQUIRE(weight.grad().at({2, j}) == 0.0);
  REQUIRE(test::max_abs_diff(weight.grad(), expected) <= test::kFloat64Tol);
}

TEST_CASE("embedding rejects out of range ids", "[embedding]") {
  Tensor weight = zeros({5, 3}, Dtype::Float64);
  REQUIRE_THROWS_WITH(embedding(weight, from_vector<std::int64_t>({0, 1, 2, 7}, {2, 2})),
                      Contains("id 7") && Contains("position (1, 1)") && Contains("[0, 5)"));
  REQUIRE_THROWS_WITH(embedding(weight, from_vector<std::int64_t>({-3}, {1})), Contains("id -3"));
  REQUIRE_THROWS_WITH(embedding(weight, from_vector<std::int64_t>({0}, {1}), 5), Contains("padding_idx 5"));
  REQUIRE_THROWS_WITH(embedding(weight, from_vector<double>({0.0}, {1})), Contains("int64 ids"));
}

// ---------------------------------------------------------------- masked_fill, where, eq, ne

TEST_CASE("masked_fill fills where the mask is true", "[mask]") {
  Generator gen(25);
  Tensor x = randn({2, 3, 4}, gen, Dtype::Float64);
  const std::vector<bool> m{true, false, true};  // (3, 1): broadcast over dims 0 and 2
  Tensor y = masked_fill(x, from_vector<bool>(m, {3, 1}), -1e9);
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t c = 0; c < 4; ++c) REQUIRE(y.at({a, b, c}) == (m[b] ? -1e9 : x.at({a, b, c})));
  // a float mask: nonzero means fill
  Tensor yf = masked_fill(x, from_vector<double>({0.0, 2.5, 0.0, -1.0}, {4}), 7);
  for (std::int64_t c = 0; c < 4; ++c) REQUIRE(yf.at({1, 2, c}) == (c % 2 ? 7 : x.at({1, 2, c})));
}

TEST_CASE("masked_fill gradcheck with a broadcast mask", "[mask][grad]") {
  Generator gen(26);
  Tensor x = test::grad_input({4, 3}, gen);
  Tensor mask = from_vector<bool>({false, true, true, false}, {1, 4});  // broadcast over rows
  // on the transposed (3, 4) view
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0].transpose(0, 1), mask, 3.0); },
                          {x});
  // filled positions get exactly zero gradient, the others the upstream gradient
  sum(masked_fill(x.transpose(0, 1), mask, 3.0)).backward();
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) REQUIRE(x.grad().at({i, j}) == (i == 1 || i == 2 ? 0.0 : 1.0));
}

TEST_CASE("masked_fill rejects a mask that does not broadcast", "[mask]") {
  Tensor x = zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(masked_fill(x, zeros({2, 5}, Dtype::Bool), 0),
                      Contains("masked_fill") && Contains("(2, 5)") && Contains("(2, 3, 4)"));
  // broadcasting goes one way: the mask cannot be larger than x
  REQUIRE_THROWS_WITH(masked_fill(zeros({4}), zeros({2, 4}, Dtype::Bool), 0), Contains("(2, 4)"));
}

TEST_CASE("where selects and broadcasts", "[mask]") {
  Generator gen(27);
  const std::vector<bool> c{true, false, true};
  Tensor cond = from_vector<bool>(c, {3, 1});
  Tensor a = randn({1, 4}, gen, Dtype::Float64);
  Tensor b = randn({4}, gen, Dtype::Float64);
  Tensor y = where(cond, a, b);
  REQUIRE(y.shape() == Shape{3, 4});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) REQUIRE(y.at({i, j}) == (c[i] ? a.at({0, j}) : b.at({j})));
  REQUIRE_THROWS_WITH(where(cond, zeros({2}), zeros({2}, Dtype::Float64)), Contains("where"));
}

TEST_CASE("where gradcheck with broadcasting", "[mask][grad]") {
  Generator gen(28);
  Tensor cond = from_vector<bool>({true, false, false, true, true, false}, {2, 1, 3});
  Tensor a = test::grad_input({4, 3}, gen);
  Tensor b = test::grad_input({2, 1, 1}, gen);
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {a, b});
  // each element of a is picked once per row of cond where cond is true, b where false
  sum(where(cond, a, b)).backward();
  REQUIRE(a.grad().at({0, 0}) == 2);  // cond[:, 0, 0] = (true, true)
  REQUIRE(a.grad().at({3, 1}) == 1);  // cond[:, 0, 1] = (false, true)
  REQUIRE(b.grad().at({0, 0, 0}) == 4 * 2);  // row 0 of cond has 2 false, over 4 rows of a
  REQUIRE(b.grad().at({1, 0, 0}) == 4 * 1);
}

TEST_CASE("eq and ne give bool masks", "[mask]") {
  Tensor ids = from_vector<std::int64_t>({0, 3, 0, 5}, {2, 2});
  Tensor pad = eq(ids, 0);
  REQUIRE(pad.dtype() == Dtype::Bool);
  REQUIRE(pad.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1, 0});
  REQUIRE(ne(ids, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 0, 1});
  // on a non-contiguous float view; NaN equals nothing
  Tensor x = from_vector<double>({1, std::nan(""), 2, 1}, {2, 2}).transpose(0, 1);  // [[1, 2], [nan, 1]]
  REQUIRE(eq(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 0, 1});
  REQUIRE(ne(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 1, 0});
  REQUIRE_FALSE(eq(x, 1).requires_grad());
}

// ---------------------------------------------------------------- dropout

TEST_CASE("dropout zeroes about p of the elements and scales the rest by 1 over 1-p", "[dropout]") {
  constexpr std::int64_t n = 100000;
  constexpr double p = 0.3;
  // The number of zeros is Binomial(n, p): std of the zeroed fraction = sqrt(p (1-p) / n)
  // = sqrt(0.21 / 1e5) = 1.45e-3. Five standard deviations (7.2e-3): a correct dropout fails
  // this about once in 1.7 million seeds; drawing with p off by 0.01 shifts the mean by 6.9
  // std and fails it about 97% of the time (the exact replay below catches it always).
  const double tolerance = 5 * std::sqrt(p * (1 - p) / n);
  Generator gen(29);
  Tensor y = dropout(ones({n}, Dtype::Float64), p, gen);
  const std::vector<double> v = y.to_vector<double>();
  // counted, then asserted once (100k REQUIREs would dominate the test's run time)
  std::int64_t zeros_count = 0, wrong_scale = 0, wrong_draw = 0;
  Generator replay(29);  // the call draws one key; element i is kept by dropout_keeps(key, i, ...)
  const std::uint64_t key = replay.next_u64(), threshold = dropout_threshold(p);
  for (std::int64_t i = 0; i < n; ++i) {
    const double e = v[i];
    if (e == 0)
      ++zeros_count;
    else if (e != 1.0 / (1.0 - p))  // exactly the scale: 1 * (1 / (1 - p))
      ++wrong_scale;
    if ((e != 0) != dropout_keeps(key, i, threshold)) ++wrong_draw;
  }
  REQUIRE(wrong_scale == 0);
  REQUIRE(wrong_draw == 0);
  REQUIRE(std::abs(static_cast<double>(zeros_count) / n - p) <= tolerance);
}

TEST_CASE("dropout with the same seed gives the same mask", "[dropout]") {
  Generator data_gen(30);
  Tensor x = randn({8, 16}, data_gen, Dtype::Float32);
  Generator g1(7), g2(7), g3(8);
  Tensor y1 = dropout(x, 0.5, g1), y2 = dropout(x, 0.5, g2), y3 = dropout(x, 0.5, g3);
  REQUIRE(test::max_abs_diff(y1, y2) == 0);
  REQUIRE(test::max_abs_diff(y1, y3) > 0);
  // a non-contiguous input draws in the row-major order of its own (logical) shape
  Tensor xt = x.transpose(0, 1);
  Generator g4(7), g5(7);
  REQUIRE(test::max_abs_diff(dropout(xt, 0.5, g4), dropout(xt.contiguous(), 0.5, g5)) == 0);
  // p = 0 returns x itself and draws nothing
  Generator g6(7);
  const Generator::State before = g6.state();
  Tensor same = dropout(x, 0.0, g6);
  REQUIRE(same.impl() == x.impl());
  REQUIRE(g6.state() == before);
}

TEST_CASE("dropout draws one key per call and each call gets a new mask", "[dropout]") {
  Generator data_gen(33);
  const Tensor x = randn({8, 16}, data_gen, Dtype::Float32);
  const Tensor big = ones({300, 300}, Dtype::Float32);  // above the threaded-loop size: still one draw
  Generator gen(34);
  Generator advanced = gen;  // a copy, advanced by hand by one next_u64() per call
  const Tensor y1 = dropout(x, 0.5, gen);
  const std::uint64_t key1 = advanced.next_u64();
  REQUIRE(gen.state() == advanced.state());
  const Tensor y2 = dropout(x, 0.5, gen);
  const std::uint64_t key2 = advanced.next_u64();
  REQUIRE(gen.state() == advanced.state());
  dropout(big, 0.5, gen);
  advanced.next_u64();
  REQUIRE(gen.state() == advanced.state());
  // the two masks differ, and each is the rule applied to its own key
  const std::vector<float> v1 = y1.to_vector<float>(), v2 = y2.to_vector<float>();
  const std::uint64_t threshold = dropout_threshold(0.5);
  REQUIRE(threshold == 0x80000000u);  // 0.5 * 2^32 exactly
  std::int64_t differ = 0, wrong = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    differ += (v1[i] == 0) != (v2[i] == 0);
    wrong += (v1[i] != 0) != dropout_keeps(key1, i, threshold);
    wrong += (v2[i] != 0) != dropout_keeps(key2, i, threshold);
  }
  REQUIRE(wrong == 0);
  // two independent masks of 128 elements at p = 0.5 agree everywhere with probability 2^-128
  REQUIRE(differ > 0);
}

TEST_CASE("dropout threshold is p rounded up to a multiple of 2 to the -32", "[dropout]") {
  Generator data_gen(35);
  const Tensor x = randn({4, 64}, data_gen, Dtype::Float64);  // never exactly 0
  // p = 1 - 2^-40 < 1 is allowed; ceil(p * 2^32) = 2^32, so every element is dropped
  const double almost_one = 1.0 - 0x1p-40;
  REQUIRE(dropout_threshold(almost_one) == (std::uint64_t{1} << 32));
  Generator gen(36);
  const std::vector<double> all_dropped = dropout(x, almost_one, gen).to_vector<double>();
  REQUIRE(std::count(all_dropped.begin(), all_dropped.end(), 0.0) == x.numel());
  // a tiny p rounds up to 2^-32 (threshold 1): only a draw of exactly 0 is dropped
  REQUIRE(dropout_threshold(1e-300) == 1u);
  Generator gen2(37), key_gen(37);
  const std::vector<double> v = dropout(x, 1e-300, gen2).to_vector<double>();
  const std::uint64_t key = key_gen.next_u64();
  for (std::int64_t i = 0; i < x.numel(); ++i) REQUIRE((v[i] != 0) == dropout_keeps(key, i, 1));
}

TEST_CASE("dropout pair hashes are the splitmix64 stream of the key", "[dropout][reference]") {
  // splitmix64 seeded with 0: its first three outputs, as published with the algorithm
  // (Steele, Lea and Flood 2014; Vigna's splitmix64.c) and recomputed in Python.
  REQUIRE(dropout_pair_bits(0, 0) == 0xE220A8397B1DCDAFull);
  REQUIRE(dropout_pair_bits(0, 1) == 0x6E789E6AA1B965F4ull);
  REQUIRE(dropout_pair_bits(0, 2) == 0x06C45D188009454Full);
  // element 2j reads the low 32 bits of pair j, element 2j + 1 the high 32 bits
  const std::uint64_t low = 0x7B1DCDAFull, high = 0xE220A839ull;
  REQUIRE(dropout_keeps(0, 0, low));
  REQUIRE_FALSE(dropout_keeps(0, 0, low + 1));
  REQUIRE(dropout_keeps(0, 1, high));
  REQUIRE_FALSE(dropout_keeps(0, 1, high + 1));
}

TEST_CASE("dropout gradcheck with a fixed seed", "[dropout][grad]") {
  Generator gen(31);
  Tensor x = test::grad_input({3, 5}, gen);
  Generator mask_gen;
  // re-seeded on every call, so each finite-difference evaluation draws the same mask
  auto f = [&](const std::vector<Tensor>& in) {
    mask_gen.manual_seed(99);
    return dropout(in[0].transpose(0, 1), 0.4, mask_gen);
  };
  test::require_gradcheck(f, {x});
  // grad_x = g * keep / (1 - p): 1 / 0.6 where kept, 0 where dropped
  Tensor y = f({x});
  sum(y).backward();
  Tensor yt = y.transpose(0, 1);  // back to x's layout
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j)
      REQUIRE(x.grad().at({i, j}) == (yt.at({i, j}) == 0 ? 0.0 : 1.0 / 0.6));
}

TEST_CASE("dropout rejects p outside 0 to 1", "[dropout]") {
  Generator gen(32);
  Tensor x = ones({4});
  REQUIRE_THROWS_WITH(dropout(x, 1.0, gen), Contains("[0, 1)") && Contains("got p = 1"));
  REQUIRE_THROWS_WITH(dropout(x, -0.1, gen), Contains("got p = -0.1"));
  REQUIRE_THROWS_WITH(dropout(x, std::nan(""), gen), Contains("dropout"));
}
