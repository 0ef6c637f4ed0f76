// File: engine/distributed/inproc_communicator.h
//
// InProcCommunicator: the Communicator for P ranks that are threads of one
// process. Each collective is a rendezvous: every rank publishes pointers to
// its buffers, a barrier makes them visible, each rank copies (or reduces)
// what it needs from the others, and a second barrier keeps every buffer
// alive and unchanged until all readers are done. Nothing is allocated per
// call once the callers' vectors have reached their steady-state capacity.
//
// Bytes accounting (comm spans and bytes_sent): what this rank would put on
// the wire with a direct algorithm. AllToAll counts send[d] for d != rank
// (a rank's message to itself never leaves the device); AllGather and
// AllReduceSum count the rank's buffer once per peer.
//
//   InProcCommunicator comm(4);
//   // on rank r's thread:
//   comm.AllToAll(r, send, &recv, &recorder, "dispatch", layer);
//
// Thread-safety: as Communicator: rank r's calls come from one thread, and all
// ranks call the same collectives in the same order. bytes_sent(r) may be read
// by another thread once rank r's thread has synchronised with it (e.g. after
// the step's join).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/distributed/communicator.h"

namespace sy::engine {

// Sense-reversing barrier for P threads: spins briefly (yielding) and then
// sleeps on the generation word, so a lone waiter on an oversubscribed box
// does not burn the core its peers need.
class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}
  void ArriveAndWait();

 private:
  const int parties_;
  std::atomic<int> count_{0};
  std::atomic<uint32_t> generation_{0};
};

class InProcCommunicator final : public Communicator {
 public:
  // REQUIRES: size >= 1.
  explicit InProcCommunicator(int size);

  int size() const override { return size_; }
  void AllToAll(int rank, const std::vector<std::vector<float>>& send,
                std::vector<std::vector<float>>* recv, SpanRecorder* rec, const char* name,
                int layer) override;
  void AllReduceSum(int rank, std::vector<float>* data, SpanRecorder* rec, const char* name,
                    int layer) override;
  void AllGather(int rank, const std::vector<float>& in, std::vector<float>* out, SpanRecorder* rec,
                 const char* name, int layer) override;
  void Barrier(int rank) override;

  // Total bytes rank `rank` has sent since construction (see accounting above).
  int64_t bytes_sent(int rank) const { return slots_[rank].bytes_sent; }

 private:
  // One rank's published buffers; padded so ranks never share a cache line.
  struct alignas(64) Slot {
    const std::vector<std::vector<float>>* a2a_send = nullptr;
    const std::vector<float>* vec = nullptr;
    std::vector<float> reduce_tmp;
    int64_t bytes_sent = 0;
  };

  const int size_;
  SpinBarrier barrier_;
  std::vector<Slot> slots_;
};

}  // namespace sy::engine
