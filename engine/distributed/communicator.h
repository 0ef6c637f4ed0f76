// File: engine/distributed/communicator.h
//
// Communicator: every byte that moves between devices goes through here, with
// MPI's shape: P ranks, each calling the same collective in the same order
// with its own buffers. The in-process implementation (inproc_communicator.h)
// runs one rank per thread and rendezvouses them; a multi-process backend
// (MPI, NCCL-like) can replace it without touching callers.
//
// Every call records a "comm" span (name, bytes this rank sent) through the
// SpanRecorder given for that rank, so communication shows in the kernel trace
// beside compute.
//
// Thread-safety: rank r's methods are called only from rank r's thread. All
// ranks must call the same sequence of collectives (as with MPI), else they
// deadlock; the model runner guarantees this.
#pragma once

#include <cstdint>
#include <vector>

namespace sy::engine {

class SpanRecorder;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;

  // send[d] goes to rank d; on return recv[s] holds what rank s sent to this
  // rank. Sizes may differ per pair (and be zero).
  virtual void AllToAll(int rank, const std::vector<std::vector<float>>& send,
                        std::vector<std::vector<float>>* recv, SpanRecorder* rec, const char* name,
                        int layer) = 0;
  // Element-wise sum over ranks, in place; every rank passes the same length.
  // The sum is taken in rank order, so every rank gets bit-identical results.
  virtual void AllReduceSum(int rank, std::vector<float>* data, SpanRecorder* rec, const char* name,
                            int layer) = 0;
  // out = concatenation of every rank's `in`, in rank order.
  virtual void AllGather(int rank, const std::vector<float>& in, std::vector<float>* out,
                         SpanRecorder* rec, const char* name, int layer) = 0;
  virtual void Barrier(int rank) = 0;
};

}  // namespace sy::engine
