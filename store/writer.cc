// store::Writer: the queue and the writer thread. SQL is in row_writer.cc.
//
// Wake-up rule (docs/STORE.md "Write policy"): the thread sleeps until the
// queue holds batch_max items, flush_ms passed since it saw the queue
// non-empty, Flush() asks, or the Writer is being destroyed. Nothing else
// wakes it, which is what makes drop counting deterministic when
// queue_capacity < batch_max.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "store/row_writer.h"
#include "store/store.h"

namespace sy::store {

class Writer::Impl {
 public:
  Impl(std::unique_ptr<RowWriter> rows, const WriterOptions& options, std::string path)
      : rows_(std::move(rows)),
        capacity_(options.queue_capacity),
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

  // Messages are bounded by capacity; commands and EndRun are rare operator
  // actions and always get in (unless writing has stopped).
  void Push(Item item, const std::string& run, bool bounded) {
    std::unique_lock<std::mutex> l(mu_);
    if (!status_.ok() || (bounded && queue_.size() >= capacity_)) {
      ++counters_.dropped;
      if (status_.ok()) ++drops_[run];
      return;
    }
    queue_.push_back(std::move(item));
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
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
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
      if (s.ok()) {
        counters_.written += static_cast<int64_t>(n);
      } else {
        // The batch was rolled back: it, and everything still queued, is lost.
        status_ = s;
        counters_.dropped += static_cast<int64_t>(n + queue_.size());
        processed_ += queue_.size();
        queue_.clear();
      }
      done_.notify_all();
    }
  }

  std::unique_ptr<RowWriter> rows_;
  const size_t capacity_;
  const size_t batch_max_;
  const std::chrono::milliseconds flush_;
  const std::string path_;

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the writer thread waits here
  std::condition_variable done_;  // Flush() waits here
  std::deque<Item> queue_;
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
  impl_->Push(Item(std::move(m)), run, /*bounded=*/true);
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
