// Tests for the threaded paths: the element-wise kernels (kernels.h parallel_for_each_strided,
// the column sums of ops_reduce.cpp) and the dropout kernels (the counter-based mask of
// dropout_mask.h), each against values computed here one element at a time and bit-identical on
// 1 and 2 threads; gemm's blocks (gemm.h), bit-identical on 1, 2 and 3 threads; and how many
// cores the process can use (threads.h), which sets the blocks and the default thread count.
//
// The tensors have at least kParallelMinElements elements, so the threaded paths really run.
// Tags: [parallel] on all; [reference] where a fast path is checked against a plain loop;
// [matmul] on gemm's blocks.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/dropout_mask.h"
#include "autograd/runtime/gemm.h"
#include "autograd/kernels.h"
#include "autograd/runtime/threads.h"
#include "test_util.h"

using namespace sf;

namespace {

using test::on_one_and_two_threads;  // tests/test_util.h

}  // namespace

TEST_CASE("parallel copy of a permuted tensor moves every element to its place", "[parallel][reference]") {
  Generator gen(21);
  const Tensor x = randn({40, 30, 70}, gen);  // 84000 elements, above kParallelMinElements
  REQUIRE(x.numel() >= kParallelMinElements);
  const auto [one, two] = on_one_and_two_threads([&] { return contiguous(x.permute({2, 0, 1})); });
  REQUIRE(one == two);
  const std::vector<double> vx = x.to_vector<double>();
  std::int64_t misplaced = 0;  // counted, then checked once (one REQUIRE per element is slow)
  for (std::int64_t k = 0; k < 70; ++k)  // out[k, i, j] = x[i, j, k]
    for (std::int64_t i = 0; i < 40; ++i)
      for (std::int64_t j = 0; j < 30; ++j) misplaced += one[(k * 40 + i) * 30 + j] != vx[(i * 30 + j) * 70 + k];
  REQUIRE(misplaced == 0);
}

TEST_CASE("parallel broadcast add and mask match one element at a time", "[parallel][reference]") {
  Generator gen(22);
  const Tensor a = randn({300, 257}, gen), bias = randn({257}, gen);
  const auto [one, two] = on_one_and_two_threads([&] { return add(a, bias); });
  REQUIRE(one == two);
  const std::vector<float> va = a.to_vector<float>(), vb = bias.to_vector<float>();
  std::int64_t wrong = 0;
  for (std::int64_t r = 0; r < 300; ++r)
    for (std::int64_t c = 0; c < 257; ++c) wrong += one[r * 257 + c] != static_cast<double>(va[r * 257 + c] + vb[c]);
  REQUIRE(wrong == 0);

  // masked_fill's backward zeroes the gradient where the mask was set (a threaded zero_where)
  Tensor x = randn({300, 257}, gen);
  x.requires_grad_();
  std::vector<bool> bits(300 * 257);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = gen.uniform() < 0.5;
  const Tensor mask = from_vector<bool>(bits, {300, 257});
  const Tensor g = randn({300, 257}, gen);
  const auto [g1, g2] = on_one_and_two_threads([&] {
    x.zero_grad();
    masked_fill(x, mask, 0.0).backward(g);
    return x.grad();
  });
  REQUIRE(g1 == g2);
  const std::vector<float> vg = g.to_vector<float>();
  std::int64_t wrong_grads = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) wrong_grads += g1[i] != (bits[i] ? 0.0 : static_cast<double>(vg[i]));
  REQUIRE(wrong_grads == 0);
}

TEST_CASE("parallel sum over the leading dims matches a plain double sum", "[parallel][reference]") {
  Generator gen(23);
  const Tensor x = randn({6, 50, 257}, gen);  // (B,T,D) summed to (D): a bias gradient
  const auto [one, two] = on_one_and_two_threads([&] { return sum(x, {0, 1}); });
  REQUIRE(one == two);
  const std::vector<float> vx = x.to_vector<float>();
  for (std::int64_t c = 0; c < 257; ++c) {
    double s = 0;  // the same order (rows in turn) and precision (double) as the kernel
    for (std::int64_t r = 0; r < 300; ++r) s += vx[r * 257 + c];
    CHECK(one[c] == static_cast<double>(static_cast<float>(s)));
  }
}

TEST_CASE("dropout keeps exactly the elements the counter-based rule keeps", "[parallel][reference][dropout]") {
  constexpr double kP = 0.1;
  Generator data_gen(24);
  // 301 * 257 = 77357 elements: above kParallelMinElements, and odd, so the last block of the
  // kernel ends in half a pair (the last element uses the low half of its pair's hash).
  const Tensor x = randn({301, 257}, data_gen);
  REQUIRE(x.numel() >= kParallelMinElements);
  REQUIRE(x.numel() % 2 == 1);
  // ceil(0.1 * 2^32) = ceil(429496729.6), computed by hand
  const std::uint64_t threshold = dropout_threshold(kP);
  REQUIRE(threshold == 429496730u);
  Generator key_gen(25);
  const std::uint64_t key = key_gen.next_u64();  // the one draw dropout makes from Generator(25)
  const auto [one, two] = on_one_and_two_threads([&] {
    Generator gen(25);
    return dropout(x, kP, gen);
  });
  REQUIRE(one == two);
  const std::vector<float> vx = x.to_vector<float>();
  const float scale = static_cast<float>(1.0 / (1.0 - kP));
  std::int64_t wrong = 0, dropped = 0;  // counted, then checked once (one REQUIRE per element is slow)
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool keeps = dropout_keeps(key, i, threshold);  // the documented rule, one element at a time
    wrong += one[i] != (keeps ? static_cast<double>(vx[i] * scale) : 0.0);
    dropped += !keeps;
  }
  REQUIRE(wrong == 0);
  REQUIRE(dropped > 0);  // the rule really dropped something (so the comparison above can fail)

  // backward, with a transposed (non-contiguous) incoming gradient: g * keep / (1 - p)
  Tensor xg = x.detach();
  xg.requires_grad_();
  const Tensor g_t = randn({257, 301}, data_gen);  // g = g_t^T, a view
  const auto [g1, g2] = on_one_and_two_threads([&] {
    xg.zero_grad();
    Generator gen(25);
    dropout(xg, kP, gen).backward(g_t.transpose(0, 1));
    return xg.grad();
  });
  REQUIRE(g1 == g2);
  const std::vector<float> vg = contiguous(g_t.transpose(0, 1)).to_vector<float>();
  std::int64_t wrong_grads = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    wrong_grads += g1[i] != (dropout_keeps(key, i, threshold) ? static_cast<double>(vg[i] * scale) : 0.0);
  REQUIRE(wrong_grads == 0);
}

TEST_CASE("gemm cuts a product into the same blocks on any thread count: 1, 2, 3 threads, the same bits",
          "[parallel][matmul]") {
  // Where a block starts can change an element's last bits (a BLAS kernel's tiles: gemm.h). With
  // one block per thread, 1 thread would make one call and 2 threads would cut 1088 rows at 544,
  // and thousands of elements of this product could get other last bits. So the blocks are one
  // per usable core whatever the thread count.
  const int cores = usable_cores();
  REQUIRE(gemm_blocks(1088, 256, 256) == std::min(cores, 1088 / kGemmBlockAlign));  // row blocks
  REQUIRE(gemm_blocks(64, 3000, 256) == std::min(cores, 3000 / kGemmBlockAlign));   // column blocks
  REQUIRE(gemm_blocks(40, 24, 100) == 1);  // small: one call
  REQUIRE(gemm_blocks(20, 20, 700) == 1);  // large, too narrow for two blocks
  if (cores == 1) WARN("one core: every product is one call, so the thread counts compare one call with itself");
  struct Case {
    int m, n, k;
    bool ta, tb;
  };
  Generator gen(26);
  for (const Case& c : {Case{1088, 256, 256, false, true}, Case{1088, 256, 256, true, false},
                        Case{64, 3000, 256, false, false}, Case{64, 3000, 256, false, true}}) {
    INFO(c.m << "x" << c.n << "x" << c.k << " trans_a " << c.ta << " trans_b " << c.tb);
    const Tensor a = randn({c.ta ? c.k : c.m, c.ta ? c.m : c.k}, gen);  // stored (k,m) when transposed
    const Tensor b = randn({c.tb ? c.n : c.k, c.tb ? c.k : c.n}, gen);
    const auto* pa = static_cast<const float*>(a.raw_data());
    const auto* pb = static_cast<const float*>(b.raw_data());
    auto product = [&] {
      std::vector<float> out(static_cast<std::size_t>(c.m) * c.n);
      gemm(c.ta, c.tb, c.m, c.n, c.k, pa, static_cast<int>(a.size(1)), pb, static_cast<int>(b.size(1)), out.data(), c.n);
      return out;
    };
    const int before = num_threads();
    std::vector<std::vector<float>> by_threads;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      by_threads.push_back(product());
    }
    set_num_threads(before);
    for (std::size_t t = 1; t < by_threads.size(); ++t) {
      INFO("threads " << t + 1 << " against 1");
      std::int64_t differ = 0;  // compared as bits (memcmp), counted, then checked once
      for (std::size_t i = 0; i < by_threads[0].size(); ++i)
        differ += std::memcmp(&by_threads[0][i], &by_threads[t][i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("usable cores: the CPUs this process may run on, capped by its cgroup's CPU quota", "[parallel]") {
  // cgroup v2's cpu.max and v1's quota/period, in whole cores rounded up; 0 = no limit
  CHECK(cores_of_cpu_max("max 100000\n") == 0);
  CHECK(cores_of_cpu_max("200000 100000\n") == 2);
  CHECK(cores_of_cpu_max("150000 100000") == 2);  // docker --cpus 1.5: two threads, not one
  CHECK(cores_of_cpu_max("50000 100000") == 1);   // half a core still needs one thread
  CHECK(cores_of_cpu_max("") == 0);               // no file
  CHECK(cores_of_cpu_max("12x 100000") == 0);     // not two numbers: no limit read
  CHECK(cores_of_cpu_quota(-1, 100000) == 0);     // v1: -1 = no quota
  CHECK(cores_of_cpu_quota(300000, 100000) == 3);
  CHECK(cores_of_cpu_quota(100000, 0) == 0);

  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  const int allowed_cpus = CPU_COUNT(&allowed);
  CHECK(count_usable_cores() >= 1);
  CHECK(count_usable_cores() <= allowed_cpus);
  CHECK(usable_cores() == count_usable_cores());  // nothing changed since the first reading

  // As `taskset -c CPU`: with one CPU allowed, one core is usable, whatever the machine has.
  cpu_set_t one_cpu;
  CPU_ZERO(&one_cpu);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &one_cpu);
      break;
    }
  REQUIRE(sched_setaffinity(0, sizeof one_cpu, &one_cpu) == 0);  // this thread only
  const int on_one_cpu = count_usable_cores();
  REQUIRE(sched_setaffinity(0, sizeof allowed, &allowed) == 0);
  CHECK(on_one_cpu == 1);
  CHECK(count_usable_cores() == usable_cores());
}
