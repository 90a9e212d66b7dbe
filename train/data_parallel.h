// Data parallelism as the training loop sees it: one object, which does nothing in a single
// process. Under mpirun (train/distributed/distributed.h) every rank trains on its own shard of
// each global batch and the ranks add their gradients before the step, so every rank takes the
// same step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "autograd/generator.h"
#include "data/batcher.h"
#include "nn/module.h"
#include "train/training_data.h"

namespace sf::train {

class DataParallel {
 public:
  DataParallel();  // the world this process was started in (one rank without mpirun)
  bool active() const { return world_ > 1; }

  // Replaces the global batch by this rank's rows r, r + n, r + 2n, ... (strided, so every rank
  // gets short and long pairs alike: the batcher sorts a batch's rows by length), rebuilt from
  // its rows' indices by `make` (the task's batch of those rows) so its padding fits its own
  // rows; empty with more ranks than rows. Returns the shard's share of the global batch's
  // target tokens (1 in a single process): the loss is scaled by it, so the ranks' summed
  // losses and gradients are one process's mean.
  using MakeBatch = std::function<data::Batch(const std::vector<std::int64_t>& indices)>;
  double take_shard(data::Batch& batch, const MakeBatch& make) const;

  // Adds up the ranks' gradients (one MPI_Allreduce over a flat buffer) and the step's losses;
  // from here on every rank holds the same numbers. Alone: nothing.
  void sum(const nn::NamedParameters& params, double& loss, double& nll) const;

  // Each rank other than 0 draws its own dropout masks, from a stream derived from rank 0's (the
  // one saved in checkpoints) and the rank number, so a run is reproducible; with dropout > 0 an
  // N-rank run is therefore not bit-equal to one process, only statistically the same.
  void seed_dropout(Generator& dropout) const;

  // Throws when the ranks' parameters differ (checked at every validation). Alone: nothing.
  void check_in_sync(const nn::NamedParameters& params) const;
  // The largest value over the ranks (a stop request on any rank stops all).
  int max_over_ranks(int value) const;

  // The log line that says how a step's batch is split, "" alone.
  std::string describe(std::int64_t batch_tokens, std::int64_t accum_steps) const;
  // Seconds spent in the gradient allreduce so far (0 alone).
  double allreduce_seconds() const;

 private:
  int rank_ = 0, world_ = 1;
};

}  // namespace sf::train
