#include "train/data_parallel.h"

#include <vector>

#include "train/distributed/distributed.h"

namespace sf::train {

DataParallel::DataParallel() : rank_(rank()), world_(world_size()) {}

double DataParallel::take_shard(data::Batch& batch, const MakeBatch& make) const {
  if (world_ == 1) return 1.0;
  const std::int64_t global_tokens = batch.tgt_tokens;
  std::vector<std::int64_t> indices;
  for (std::int64_t row = rank_; row < batch.rows(); row += world_) indices.push_back(batch.indices[static_cast<std::size_t>(row)]);
  batch = indices.empty() ? data::Batch{} : make(indices);
  return static_cast<double>(batch.tgt_tokens) / static_cast<double>(global_tokens);
}

void DataParallel::sum(const nn::NamedParameters& params, double& loss, double& nll) const {
  if (world_ == 1) return;
  allreduce_gradients(params);
  std::vector<double> losses = {loss, nll};
  allreduce_sum(losses);
  loss = losses[0], nll = losses[1];
}

void DataParallel::seed_dropout(Generator& dropout) const {
  if (rank_ == 0) return;
  const std::uint64_t base = dropout.state()[0];
  dropout.manual_seed(base ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank_)));
}

void DataParallel::check_in_sync(const nn::NamedParameters& params) const { check_parameters_in_sync(params); }

int DataParallel::max_over_ranks(int value) const { return allreduce_max(value); }

std::string DataParallel::describe(std::int64_t batch_tokens, std::int64_t accum_steps) const {
  if (world_ == 1) return "";
  return "data-parallel: " + std::to_string(world_) + " processes (MPI); every step's global batch of about " +
         std::to_string(batch_tokens) + " x " + std::to_string(accum_steps) +
         " tokens is split between them, about " + std::to_string(batch_tokens / world_) +
         " tokens each, gradients summed with MPI_Allreduce";
}

double DataParallel::allreduce_seconds() const { return train::allreduce_seconds(); }

}  // namespace sf::train
