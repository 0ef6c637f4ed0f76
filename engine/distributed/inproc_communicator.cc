#include "engine/distributed/inproc_communicator.h"

#include <cassert>
#include <thread>

#include "engine/trace/span_recorder.h"

namespace sy::engine {

void SpinBarrier::ArriveAndWait() {
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
    // Reset before publishing the new generation: a released thread may
    // arrive at the next barrier immediately.
    count_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    return;
  }
  for (int i = 0; i < 64; ++i) {
    if (generation_.load(std::memory_order_acquire) != gen) return;
    std::this_thread::yield();
  }
  while (generation_.load(std::memory_order_acquire) == gen) {
    generation_.wait(gen, std::memory_order_acquire);
  }
}

InProcCommunicator::InProcCommunicator(int size)
    : size_(size), barrier_(size), slots_(static_cast<size_t>(size)) {
  assert(size >= 1);
}

void InProcCommunicator::AllToAll(int rank, const std::vector<std::vector<float>>& send,
                                  std::vector<std::vector<float>>* recv, SpanRecorder* rec,
                                  const char* name, int layer) {
  assert(static_cast<int>(send.size()) == size_);
  int64_t bytes = 0;
  for (int d = 0; d < size_; ++d) {
    if (d != rank) bytes += static_cast<int64_t>(send[d].size() * sizeof(float));
  }
  SpanRecorder::Scope span(rec, name, layer, 0, 0, bytes, "comm");
  slots_[rank].bytes_sent += bytes;
  slots_[rank].a2a_send = &send;
  barrier_.ArriveAndWait();
  recv->resize(size_);
  for (int s = 0; s < size_; ++s) {
    const std::vector<float>& from = (*slots_[s].a2a_send)[rank];
    (*recv)[s].assign(from.begin(), from.end());
  }
  barrier_.ArriveAndWait();
}

void InProcCommunicator::AllReduceSum(int rank, std::vector<float>* data, SpanRecorder* rec,
                                      const char* name, int layer) {
  const int64_t bytes = static_cast<int64_t>(data->size() * sizeof(float)) * (size_ - 1);
  SpanRecorder::Scope span(rec, name, layer, 0, 0, bytes, "comm");
  slots_[rank].bytes_sent += bytes;
  slots_[rank].vec = data;
  barrier_.ArriveAndWait();
  // Every rank sums in rank order 0..P-1, so all get bit-identical results.
  std::vector<float>& tmp = slots_[rank].reduce_tmp;
  tmp.assign(slots_[0].vec->begin(), slots_[0].vec->end());
  for (int s = 1; s < size_; ++s) {
    const std::vector<float>& v = *slots_[s].vec;
    assert(v.size() == tmp.size() && "AllReduceSum needs equal lengths on every rank");
    for (size_t i = 0; i < tmp.size(); ++i) tmp[i] += v[i];
  }
  barrier_.ArriveAndWait();  // no one reads `data` any more: safe to overwrite
  data->assign(tmp.begin(), tmp.end());
}

void InProcCommunicator::AllGather(int rank, const std::vector<float>& in, std::vector<float>* out,
                                   SpanRecorder* rec, const char* name, int layer) {
  const int64_t bytes = static_cast<int64_t>(in.size() * sizeof(float)) * (size_ - 1);
  SpanRecorder::Scope span(rec, name, layer, 0, 0, bytes, "comm");
  slots_[rank].bytes_sent += bytes;
  slots_[rank].vec = &in;
  barrier_.ArriveAndWait();
  out->clear();
  for (int s = 0; s < size_; ++s)
    out->insert(out->end(), slots_[s].vec->begin(), slots_[s].vec->end());
  barrier_.ArriveAndWait();
}

void InProcCommunicator::Barrier(int rank) { barrier_.ArriveAndWait(); }

}  // namespace sy::engine
