// store::Writer: the queue and the writer thread. SQL is in row_writer.cc.
//
// Wake-up rule (docs/STORE.md "Write policy"): the thread sleeps until the
// queue holds batch_max items, flush_ms passed since it saw the queue
// non-empty, Flush() asks, or the Writer is being destroyed. Nothing else
// wakes it, which is what makes drop counting deterministic when
// queue_capacity < batch_max (or the byte cap is reached first).

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>
#include <variant>

#include "store/row_writer.h"
#include "store/store.h"

namespace sy::store {

namespace tel = telemetry;

namespace {

// Approximate heap + inline bytes a queued message holds: walks the vectors
// and strings once (no encoding), so Enqueue() stays cheap. Small strings
// are counted as if allocated: an overestimate, which only errs on the side
// of the cap.
size_t ApproxBytes(const tel::Message& m) {
  auto str = [](const std::string& s) { return s.size(); };
  size_t n = sizeof(tel::Message) + str(tel::EnvelopeOf(m).run);
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, tel::Meta>) {
          n += str(x.model.preset) + str(x.model.dtype) + str(x.layout) + str(x.trace_level) +
               str(x.workload) + x.expert_device.size() * sizeof(int);
        } else if constexpr (std::is_same_v<T, tel::Spans>) {
          n += x.spans.size() * sizeof(tel::Span);
          for (const tel::Span& s : x.spans) n += str(s.name) + str(s.kind);
        } else if constexpr (std::is_same_v<T, tel::KernelStats>) {
          n += x.kernels.size() * sizeof(tel::KernelStat);
          for (const tel::KernelStat& k : x.kernels) n += str(k.name) + str(k.kind);
        } else if constexpr (std::is_same_v<T, tel::Occupancy>) {
          n += x.devices.size() * sizeof(tel::DeviceOccupancy);
        } else if constexpr (std::is_same_v<T, tel::ExpertLoad>) {
          for (const auto& row : x.counts) n += sizeof(row) + row.size() * sizeof(int64_t);
          n += x.expert_device.size() * sizeof(int);
          for (const auto& row : x.phy2log) n += sizeof(row) + row.size() * sizeof(int);
          n += x.slot_device.size() * sizeof(int) + x.balancedness.size() * sizeof(double);
        } else if constexpr (std::is_same_v<T, tel::RequestDone>) {
          n += str(x.finish);
        } else if constexpr (std::is_same_v<T, tel::Event>) {
          // detail is a small JSON object; a flat guess per top-level entry
          // avoids walking or dumping it.
          n += str(x.kind) + str(x.name) + str(x.phase) + str(x.message) + x.detail.size() * 64;
        } else if constexpr (std::is_same_v<T, tel::Requests>) {
          n += (x.running.size() + x.waiting.size()) * sizeof(tel::RequestProgress);
        } else if constexpr (std::is_same_v<T, tel::Heartbeat>) {
          n += str(x.state);
          for (const auto& [topic, count] : x.dropped) n += 64 + str(topic);
        }
      },
      m);
  return n;
}

}  // namespace

class Writer::Impl {
 public:
  Impl(std::unique_ptr<RowWriter> rows, const WriterOptions& options, std::string path)
      : rows_(std::move(rows)),
        capacity_(options.queue_capacity),
        max_bytes_(options.queue_max_bytes),
        batch_max_(static_cast<size_t>(std::max(1, options.batch_max))),
        flush_(std::chrono::milliseconds(std::max(0, options.flush_ms))),
        path_(std::move(path)),
        thread_([this] { Loop(); }) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
    // The thread has drained the queue; finish the session.
    if (status_.ok()) status_ = rows_->Close(drops_);
  }

  // Messages are bounded by capacity and by max_bytes (`bytes` is their
  // estimate); commands and EndRun are rare operator actions and always get
  // in (unless writing has stopped).
  void Push(Item item, const std::string& run, bool bounded, size_t bytes = 0) {
    std::unique_lock<std::mutex> l(mu_);
    if (!status_.ok() || (bounded && (queue_.size() >= capacity_ || OverBytes(bytes)))) {
      ++counters_.dropped;
      if (status_.ok()) ++drops_[run];
      return;
    }
    queue_.push_back(Queued{std::move(item), bytes});
    bytes_ += bytes;
    ++accepted_;
    if (queue_.size() == 1 || queue_.size() >= batch_max_) {
      l.unlock();
      wake_.notify_one();
    }
  }

  void Flush() {
    std::unique_lock<std::mutex> l(mu_);
    uint64_t target = accepted_;
    flush_target_ = std::max(flush_target_, target);
    wake_.notify_one();
    done_.wait(l, [&] { return processed_ >= target || !status_.ok(); });
  }

  WriterCounters counters() const {
    std::lock_guard<std::mutex> l(mu_);
    WriterCounters c = counters_;
    c.queued = static_cast<int64_t>(queue_.size() + in_flight_);
    return c;
  }

  Status status() const {
    std::lock_guard<std::mutex> l(mu_);
    return status_;
  }

  const std::string& path() const { return path_; }

 private:
  struct Queued {
    Item item;
    size_t bytes;  // ApproxBytes of a message; 0 for commands and EndRun
  };

  // 0 disables the byte cap. Written as a subtraction: no overflow.
  bool OverBytes(size_t bytes) const {
    return max_bytes_ > 0 && (bytes > max_bytes_ || bytes_ > max_bytes_ - bytes);
  }

  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      if (queue_.empty()) {
        if (stopping_) return;
        wake_.wait(l, [&] { return stopping_ || !queue_.empty(); });
        continue;
      }
      wake_.wait_for(l, flush_, [&] {
        return stopping_ || queue_.size() >= batch_max_ || flush_target_ > processed_;
      });
      size_t n = std::min(batch_max_, queue_.size());
      std::vector<Item> batch;
      batch.reserve(n);
      size_t batch_bytes = 0;
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front().item));
        batch_bytes += queue_.front().bytes;
        queue_.pop_front();
      }
      DropsByRun drops;
      drops.swap(drops_);
      in_flight_ = n;
      l.unlock();
      Status s = rows_->Write(batch, drops);
      l.lock();
      in_flight_ = 0;
      processed_ += n;
      bytes_ -= batch_bytes;  // released only now: the batch was held until written
      if (s.ok()) {
        counters_.written += static_cast<int64_t>(n);
      } else {
        // The batch was rolled back: it, and everything still queued, is lost.
        status_ = s;
        counters_.dropped += static_cast<int64_t>(n + queue_.size());
        processed_ += queue_.size();
        queue_.clear();
        bytes_ = 0;
      }
      done_.notify_all();
    }
  }

  std::unique_ptr<RowWriter> rows_;
  const size_t capacity_;
  const size_t max_bytes_;
  const size_t batch_max_;
  const std::chrono::milliseconds flush_;
  const std::string path_;

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the writer thread waits here
  std::condition_variable done_;  // Flush() waits here
  std::deque<Queued> queue_;
  size_t bytes_ = 0;        // estimate of the messages queued or being written
  DropsByRun drops_;        // queue-full drops since the last batch, by run
  size_t in_flight_ = 0;    // items being written now
  uint64_t accepted_ = 0;   // items ever queued
  uint64_t processed_ = 0;  // items written or lost
  uint64_t flush_target_ = 0;
  bool stopping_ = false;
  Status status_;
  WriterCounters counters_;

  std::thread thread_;  // last: starts after every member above exists
};

Result<std::unique_ptr<Writer>> Writer::Open(const std::string& path,
                                             const WriterOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<RowWriter> rows, RowWriter::Open(path, options));
  return std::unique_ptr<Writer>(
      new Writer(std::make_unique<Impl>(std::move(rows), options, path)));
}

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::~Writer() = default;

void Writer::Enqueue(telemetry::Message m) {
  std::string run = telemetry::EnvelopeOf(m).run;
  size_t bytes = ApproxBytes(m);
  impl_->Push(Item(std::move(m)), run, /*bounded=*/true, bytes);
}

void Writer::RecordCommand(CommandRecord c) {
  std::string run = c.run;
  impl_->Push(Item(std::move(c)), run, /*bounded=*/false);
}

void Writer::EndRun(const std::string& run, bool abnormal) {
  impl_->Push(Item(EndRunOp{run, abnormal, NowUnixMs()}), run, /*bounded=*/false);
}

void Writer::Flush() { impl_->Flush(); }
WriterCounters Writer::counters() const { return impl_->counters(); }
Status Writer::status() const { return impl_->status(); }
const std::string& Writer::path() const { return impl_->path(); }

}  // namespace sy::store
