// Data-parallel training across processes (and machines) with MPI.
//
//   mpirun -np N scratchformer train --config FILE
//
// starts N copies of the program, the "ranks" 0..N-1. Every rank builds the same model from the
// same seed and the same batcher, so all of them see the same sequence of global batches. For each
// global batch, rank r takes its own shard of the sentence pairs (train/trainer.cpp), runs forward
// and backward on it, and then the ranks add their gradients together with one MPI_Allreduce over
// a flat buffer (allreduce_gradients below). After that every rank holds the gradient of the whole
// global batch, clips it and takes the same optimizer step, so the parameters stay identical on
// every rank without ever being sent.
//
// Without mpirun (or built without MPI, SCRATCHFORMER_MPI=OFF) this is a one-rank "world":
// rank() 0, world_size() 1, and every collective returns its input unchanged. MPI is only
// initialised when the process was started by an MPI launcher, so a plain run never touches it.
//
// Errors. MPI's default error handler on MPI_COMM_WORLD aborts the whole job when a
// communication fails, e.g. because another rank died; and mpirun ends the job when one of its
// processes exits abnormally. A C++ exception on one rank must do the same (otherwise the others
// wait forever in their next collective): main() calls abort_job() for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace sf::train {

using nn::NamedParameters;

// ---- the world ----------------------------------------------------------------------------
// Initialises MPI if this process was started by an MPI launcher (mpirun sets
// OMPI_COMM_WORLD_SIZE, other launchers PMI_SIZE / PMIX_RANK); otherwise does nothing. Throws
// std::runtime_error when launched as one of several ranks by a build without MPI (the copies
// would train independently and overwrite each other's run directory).
void init_distributed(int& argc, char**& argv);
// MPI_Finalize if init_distributed started MPI. Safe to call more than once.
void finalize_distributed();
// Calls init_distributed now and finalize_distributed at scope exit (for main()).
struct DistributedScope {
  DistributedScope(int& argc, char**& argv) { init_distributed(argc, argv); }
  ~DistributedScope() { finalize_distributed(); }
  DistributedScope(const DistributedScope&) = delete;
  DistributedScope& operator=(const DistributedScope&) = delete;
};

int rank();         // this process: 0 .. world_size() - 1
int world_size();   // number of processes; 1 without mpirun
bool is_main();     // rank 0: the one that writes logs, metrics, tokenizers and checkpoints
bool mpi_built();   // this build has MPI (SCRATCHFORMER_MPI)

// Ends every rank of the job with `exit_code` after printing `message` on this rank's stderr
// (MPI_Abort). Without MPI: std::exit(exit_code).
[[noreturn]] void abort_job(int exit_code, const std::string& message);

// ---- collectives (each rank must call them in the same order) -------------------------------
void barrier();
// values[i] = the sum over ranks of values[i], on every rank: one MPI_Allreduce.
void allreduce_sum(std::vector<float>& values);
void allreduce_sum(std::vector<double>& values);
// The largest `value` over all ranks (e.g. "has any rank been sent SIGINT?").
int allreduce_max(int value);
// Rank `root`'s values replace everyone's (same size on every rank).
void broadcast(std::vector<double>& values, int root = 0);

// ---- gradients ----------------------------------------------------------------------------
// How the per-rank gradients are added up:
//   Allreduce  one MPI_Allreduce per dtype over the flat buffer: fast; the order in which the
//              floats are added is up to MPI, so the sum can differ from one process's in the
//              last bits (float32: about 1e-7 relative per addition)
//   RankOrder  gather every rank's buffer on rank 0, add them in rank order 0, 1, ..., N-1,
//              broadcast the result: slower (rank 0 receives N buffers), but bit-reproducible,
//              so a test can compare with a single process that adds per-shard gradients in the
//              same order
enum class Reduction { Allreduce, RankOrder };

// Sums every parameter's .grad over all ranks, in place: flatten (float32 parameters into one
// buffer, float64 ones into another), reduce each buffer with ONE collective call ("one bucket";
// a model of more than kMaxBucketElements parameters of a dtype is cut into buckets of that
// size), scatter back. A parameter without a gradient on some ranks counts as zero there; one
// without a gradient on every rank keeps none (as in a single process, the optimizer skips it).
// With one rank it returns at once.
void allreduce_gradients(const NamedParameters& params, Reduction how = Reduction::Allreduce);
constexpr std::int64_t kMaxBucketElements = std::int64_t{1} << 28;  // 1 GiB of float32 per MPI call

// Wall time spent in the gradient collectives since the start (or since reset), in seconds.
double allreduce_seconds();
void reset_allreduce_seconds();

// The pieces of allreduce_gradients, public for the tests and for reading:
// every gradient of `dtype`'s parameters one after the other (zeros where a parameter has no
// gradient), then one presence flag per such parameter (1 = it has a gradient).
template <class T>
std::vector<T> flatten_gradients(const NamedParameters& params);
// The inverse: sets each parameter's .grad from the buffer (a new tensor), or none where its
// presence flag is 0.
template <class T>
void unflatten_gradients(const NamedParameters& params, const std::vector<T>& flat);

// ---- consistency -----------------------------------------------------------------------------
// Throws std::runtime_error when the parameters are not bit-identical on every rank (a hash of
// their bytes, compared with one small MPI_Allreduce). The trainer checks at every validation.
void check_parameters_in_sync(const NamedParameters& params);

}  // namespace sf::train
