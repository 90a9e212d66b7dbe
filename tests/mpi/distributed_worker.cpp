// distributed_worker: the MPI side of tests/test_distributed.cpp, run as
//   mpirun --oversubscribe -np 2 distributed_worker SCENARIO
// It prints what it found and exits 0 when the scenario's check holds, 1 when it does not.
//
//   exact64   K data-parallel steps of a tiny float64 Seq2Seq model (each rank: its strided shard
//             of every global batch, gradients summed with Reduction::RankOrder) against one
//             process (rank 0) that computes the same shards' gradients one after the other and
//             adds them in the same rank order: parameters must be bit-identical. It also checks
//             that the sharded, token-count-weighted gradient equals the whole batch's (one
//             process, no sharding) to float64 rounding, i.e. the loss normalisation is right.
//   die       rank 1 kills itself (SIGKILL) between two allreduces; rank 0 keeps calling allreduce
//             and must not hang: mpirun ends the job with a non-zero status.
//   throw     rank 1 throws; the exception handler (as in train/cli/main.cpp) calls abort_job, which
//             must end every rank with its exit code and the message on stderr.
//
// Letters: B batch rows, S source length, T target length, V vocabulary.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "data/batcher.h"
#include "data/tokenizer.h"
#include "nn/seq2seq.h"
#include "train/distributed/distributed.h"
#include "train/optim/optim.h"

using namespace sf;
using Seq = std::vector<std::int64_t>;

namespace {

constexpr std::int64_t kVocab = 12;   // 4 special ids + 8 words
constexpr int kSteps = 3;             // K optimizer steps
constexpr int kRowsPerBatch = 5;      // odd, so the two shards differ in size
constexpr double kLr = 0.05;
// The sharded gradient (sum of shard token losses / global token count) against the whole
// batch's mean in one process: the same sum in another order, float64, a few hundred terms.
constexpr double kNormalisationTol = 1e-12;

nn::ModelConfig tiny_config() {
  nn::ModelConfig c;
  c.src_vocab = kVocab;
  c.tgt_vocab = kVocab;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.dropout = 0.0;
  c.share_embeddings = true;
  c.tie_output = true;
  c.max_len = 16;
  c.pad_id = data::kPadId;
  return c;
}

// Global batch `step`: kRowsPerBatch reverse-task pairs of 2..6 words, the same on every rank.
std::vector<std::pair<Seq, Seq>> global_pairs(int step) {
  Generator gen(100 + static_cast<std::uint64_t>(step));
  std::vector<std::pair<Seq, Seq>> pairs;
  for (int i = 0; i < kRowsPerBatch; ++i) {
    Seq s(2 + gen.randint(5));
    for (auto& w : s) w = 4 + static_cast<std::int64_t>(gen.randint(8));
    pairs.push_back({s, Seq(s.rbegin(), s.rend())});
  }
  return pairs;
}

// Rows r, r + n, r + 2n, ... (as train/trainer.cpp shards a batch); n = 1 is the whole batch.
data::Batch shard(const std::vector<std::pair<Seq, Seq>>& pairs, int r, int n) {
  std::vector<const Seq*> src, tgt;
  std::vector<std::int64_t> idx;
  for (int i = r; i < static_cast<int>(pairs.size()); i += n) {
    src.push_back(&pairs[static_cast<std::size_t>(i)].first);
    tgt.push_back(&pairs[static_cast<std::size_t>(i)].second);
    idx.push_back(i);
  }
  return data::make_batch(src, tgt, idx);
}

std::int64_t target_tokens(const std::vector<std::pair<Seq, Seq>>& pairs) {
  std::int64_t n = 0;
  for (const auto& p : pairs) n += static_cast<std::int64_t>(p.second.size()) + 1;  // + EOS
  return n;
}

// Accumulates into .grad the gradient of (sum of the shard's token losses) / global_tokens.
void shard_backward(nn::Seq2SeqTransformer& model, const data::Batch& b, std::int64_t global_tokens) {
  Tensor logits = model.forward(b.src, b.tgt_in);  // (B,T,V)
  Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), b.tgt_out.reshape({-1}), data::kPadId);
  loss = mul(loss, static_cast<double>(b.tgt_tokens) / static_cast<double>(global_tokens));
  loss.backward();
}

int exact64() {
  const int n = train::world_size(), r = train::rank();
  Generator gen_a(7), gen_b(7);
  nn::Seq2SeqTransformer dist_model(tiny_config(), gen_a, Dtype::Float64);  // trained data-parallel
  train::SGD dist_opt(dist_model.named_parameters(), 0.9);
  // rank 0's single-process reference, from the same seed
  nn::Seq2SeqTransformer ref_model(tiny_config(), gen_b, Dtype::Float64);
  train::SGD ref_opt(ref_model.named_parameters(), 0.9);
  double worst_normalisation = 0;

  for (int step = 0; step < kSteps; ++step) {
    const auto pairs = global_pairs(step);
    const std::int64_t tokens = target_tokens(pairs);
    // data-parallel: my shard, then the rank-order sum
    shard_backward(dist_model, shard(pairs, r, n), tokens);
    train::allreduce_gradients(dist_opt.params(), train::Reduction::RankOrder);
    dist_opt.step(kLr);
    dist_opt.zero_grad();
    if (!train::is_main()) continue;
    // reference: every shard's gradient in turn, added in rank order 0, 1, ..., n-1
    std::vector<double> sum;
    for (int s = 0; s < n; ++s) {
      ref_opt.zero_grad();
      shard_backward(ref_model, shard(pairs, s, n), tokens);
      const std::vector<double> g = train::flatten_gradients<double>(ref_opt.params());
      if (s == 0) sum = g;
      else for (std::size_t k = 0; k < g.size(); ++k) sum[k] += g[k];
    }
    // ...which must equal the whole batch's gradient in one process up to rounding
    ref_opt.zero_grad();
    shard_backward(ref_model, shard(pairs, 0, 1), tokens);
    const std::vector<double> whole = train::flatten_gradients<double>(ref_opt.params());
    std::size_t values = 0;  // the gradient values, without the presence flags that follow them
    for (const auto& [_, p] : ref_opt.params()) values += static_cast<std::size_t>(p.numel());
    for (std::size_t k = 0; k < values; ++k)
      worst_normalisation = std::max(worst_normalisation, std::abs(whole[k] - sum[k]) / (std::abs(whole[k]) + 1e-3));
    train::unflatten_gradients<double>(ref_opt.params(), sum);
    ref_opt.step(kLr);
    ref_opt.zero_grad();
  }
  if (!train::is_main()) return 0;

  std::int64_t differ = 0, total = 0, changed = 0;
  Generator gen_c(7);
  nn::Seq2SeqTransformer init_model(tiny_config(), gen_c, Dtype::Float64);
  const auto dist = dist_model.named_parameters(), ref = ref_model.named_parameters(), init = init_model.named_parameters();
  for (std::size_t i = 0; i < dist.size(); ++i) {
    const auto a = dist[i].second.to_vector<double>(), b = ref[i].second.to_vector<double>(),
               c = init[i].second.to_vector<double>();
    for (std::size_t k = 0; k < a.size(); ++k) {
      differ += std::memcmp(&a[k], &b[k], sizeof(double)) != 0;
      changed += a[k] != c[k];
    }
    total += static_cast<std::int64_t>(a.size());
  }
  std::cout << "exact64: " << n << " ranks, " << kSteps << " steps: " << differ << " of " << total
            << " parameters differ in their bits from one process (" << changed
            << " moved from their initial value); worst relative difference of the sharded and the whole-batch gradient "
            << worst_normalisation << "\n";
  const bool ok = differ == 0 && changed > total / 2 && worst_normalisation < kNormalisationTol;
  return ok ? 0 : 1;
}

int die() {
  std::vector<float> v(1000, 1.0f);
  for (int i = 0; i < 200; ++i) {
    if (i == 5 && train::rank() == 1) {
      std::cerr << "rank 1: killing myself (SIGKILL)\n" << std::flush;
      raise(SIGKILL);
    }
    train::allreduce_sum(v);
    usleep(20000);
  }
  std::cout << "die: rank " << train::rank() << " finished 200 allreduces: nobody died?\n";
  return 0;
}

int throw_on_rank1() {
  try {
    std::vector<double> v(10, 1.0);
    train::allreduce_sum(v);
    if (train::rank() == 1) throw std::runtime_error("rank 1 could not read its corpus (a test error)");
    for (int i = 0; i < 200; ++i) {
      train::allreduce_sum(v);
      usleep(20000);
    }
    return 0;
  } catch (const std::exception& e) {
    train::abort_job(3, std::string("distributed_worker: error on rank ") + std::to_string(train::rank()) + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  train::DistributedScope distributed(argc, argv);
  set_num_threads(1);  // bit-reproducible kernels, and the machine is shared
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "exact64") return exact64();
  if (scenario == "die") return die();
  if (scenario == "throw") return throw_on_rank1();
  std::cerr << "distributed_worker: expected a scenario exact64, die or throw, got '" << scenario << "'\n";
  return 2;
}
