// train/distributed/distributed.h in one process (no mpirun): a world of one rank whose collectives return
// their input, and the flat gradient buffer that allreduce_gradients sends (values of each
// dtype's parameters one after another, then one presence flag per parameter) and scatters back.
// The multi-process tests are tests/test_distributed.cpp (label mpi).
#include <vector>

#include "test_util.h"
#include "train/distributed/distributed.h"

using namespace sf;

namespace {

// Three parameters: float32 (2,3) with a gradient, float32 (2) without one, float64 (2) with one.
train::NamedParameters three_parameters() {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float32).requires_grad_();
  Tensor b = zeros({2}).requires_grad_();
  Tensor c = zeros({2}, Dtype::Float64).requires_grad_();
  a.impl()->grad = from_vector(std::vector<double>{0.5, -1, 2, 0, 3, -4}, {2, 3}, Dtype::Float32).impl_ptr();
  c.impl()->grad = from_vector(std::vector<double>{0.25, 7}, {2}, Dtype::Float64).impl_ptr();
  return {{"a", a}, {"b", b}, {"c", c}};
}

}  // namespace

TEST_CASE("without mpirun the distributed world is one rank and collectives change nothing", "[distributed]") {
  CHECK(train::world_size() == 1);
  CHECK(train::rank() == 0);
  CHECK(train::is_main());
  std::vector<float> f = {1.5f, -2.0f};
  std::vector<double> d = {3.25};
  train::allreduce_sum(f);
  train::allreduce_sum(d);
  train::broadcast(d);
  train::barrier();
  CHECK(f == std::vector<float>{1.5f, -2.0f});
  CHECK(d == std::vector<double>{3.25});
  CHECK(train::allreduce_max(7) == 7);
  const auto params = three_parameters();
  const Tensor before = params[0].second.grad();
  train::allreduce_gradients(params);
  CHECK(params[0].second.grad().impl() == before.impl());  // untouched: the very same tensor
  CHECK_FALSE(params[1].second.grad().defined());
  train::check_parameters_in_sync(params);  // one rank always agrees with itself
}

TEST_CASE("flatten_gradients lays out values then presence flags and unflatten restores them", "[distributed]") {
  const auto params = three_parameters();
  // float32: a's 6 values, b's 2 zeros (no gradient), then the flags of a and b
  const std::vector<float> f = train::flatten_gradients<float>(params);
  CHECK(f == std::vector<float>{0.5f, -1, 2, 0, 3, -4, 0, 0, 1, 0});
  const std::vector<double> d = train::flatten_gradients<double>(params);
  CHECK(d == std::vector<double>{0.25, 7, 1});

  // scatter back a "reduced" buffer: doubled values, and b now has a gradient from another rank
  std::vector<float> reduced = {1, -2, 4, 0, 6, -8, 9, 10, 2, 1};
  train::unflatten_gradients<float>(params, reduced);
  CHECK(params[0].second.grad().to_vector<float>() == std::vector<float>{1, -2, 4, 0, 6, -8});
  CHECK(params[0].second.grad().shape() == Shape{2, 3});
  REQUIRE(params[1].second.grad().defined());
  CHECK(params[1].second.grad().to_vector<float>() == std::vector<float>{9, 10});
  CHECK(params[2].second.grad().to_vector<double>() == std::vector<double>{0.25, 7});  // float64 untouched

  // a flag of 0 (no rank had a gradient) leaves the parameter without one
  reduced[8] = 0;
  train::unflatten_gradients<float>(params, reduced);
  CHECK_FALSE(params[0].second.grad().defined());
}
