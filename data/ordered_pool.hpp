// An ordered work pool: items from one sequential producer are processed by N worker threads at
// once and their results are handed to the calling thread in input order, with a bounded number
// of items and bytes in flight. Used by the prepare pipeline (records → features) and the synth
// writer.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace lcm::data {

/// Items of at least this many bytes (ItemBytes) make the thread that worked on or consumed them
/// hand the heap's free memory back to the system (return_free_heap_memory).
constexpr int64_t kReturnHeapAfterBytes = int64_t(64) << 20;

/// Hands the free memory of every malloc arena back to the system (glibc malloc_trim; nothing
/// elsewhere). After a heavy item: what its parse freed would otherwise stay resident in the
/// arena of the thread that parsed it, so that the peak RSS would add up the per-thread peaks
/// even when the heavy items never ran at the same time.
inline void return_free_heap_memory() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

/// How much may be produced and not yet consumed at once (run_ordered).
struct InFlightLimit {
  int64_t items = 1;  // items produced and not yet consumed (values < 1 mean 1)
  int64_t bytes = 0;  // their total weight in bytes (ItemBytes); 0 = no byte bound
};

/// What a run held at most (for tests and benchmarks): items and bytes admitted and not yet
/// released by the consumer.
struct InFlightStats {
  int64_t peak_items = 0;
  int64_t peak_bytes = 0;
};

/// Runs produce → work → consume over a stream of items:
///  - `produce(Item& item) -> bool` fills the next item, or returns false at the end of the
///    input. It runs on one producer thread, sequentially, so it may read a file; it is not
///    called again after it returns false or once the run stops.
///  - `work(Item&& item) -> Result` runs on `workers` worker threads (values < 1 mean 1), for
///    different items at the same time; each item is worked on exactly once.
///  - `consume(Result&& result)` runs on the calling thread, once per item, in input order (the
///    result of the i-th item produced is the i-th consumed, whatever the thread count and the
///    timing), never two at once.
///  - `idle()` runs on the calling thread before each result and at least every `idle_every`
///    while it waits for one (progress reports); never under the pool's lock.
///  - `item_bytes(const Item&) -> int64_t` weighs an item once it is produced (e.g. the bytes of
///    its record); its result stands for the memory the item and its result hold until consumed.
/// Memory: an item is admitted (handed to the workers) only when fewer than `limit.items`
/// (values < 1 mean 1) items are admitted and not yet consumed, and the bytes of those plus its
/// own are at most `limit.bytes` — or when nothing is in flight, so that one item heavier than
/// the bound still runs, alone. An item's bytes are released after consume() returns for its
/// result. With a byte bound, produce() is called only while the admitted items weigh less than
/// the bound (or none is in flight), so a heavy item is not read beside another one: the items
/// produced and not yet consumed weigh at most max(limit.bytes, heaviest item) once admitted,
/// and less than limit.bytes + the heaviest item while the producer waits for room with one.
/// `stats`, when given, receives the peaks of items and bytes admitted and not yet released.
/// After an item of kReturnHeapAfterBytes or more, the worker that worked on it and the calling
/// thread once it is consumed hand the heap's free memory back (return_free_heap_memory).
/// Errors: the first exception thrown by produce, work, consume or item_bytes (the first in
/// time) stops the run: nothing more is produced, worked on or consumed (results still pending
/// are dropped), all threads are joined, and run_ordered rethrows that exception on the calling
/// thread. When a thread cannot be started, the threads already running are stopped and joined
/// and it throws std::runtime_error "cannot start N worker threads: <why>" (N = workers + 1 when
/// the producer thread fails, else workers). Returns after the last result is consumed and every
/// thread has ended. Item must be default-constructible, Item and Result movable.
template <class Item, class Result, class Produce, class Work, class Consume, class Idle,
          class ItemBytes>
void run_ordered(int workers, InFlightLimit limit, ItemBytes&& item_bytes, Produce&& produce,
                 Work&& work, Consume&& consume, Idle&& idle, InFlightStats* stats = nullptr,
                 std::chrono::milliseconds idle_every = std::chrono::milliseconds(200)) {
  if (workers < 1) workers = 1;
  const int64_t max_in_flight = limit.items < 1 ? 1 : limit.items;
  const int64_t max_bytes = limit.bytes;  // <= 0: no byte bound
  std::mutex mu;
  std::condition_variable cv_work, cv_space, cv_done;
  std::deque<std::pair<int64_t, Item>> queue;  // produced, not yet taken by a worker
  std::map<int64_t, Result> results;           // worked on, not yet consumed
  std::map<int64_t, int64_t> bytes_of;         // item index → its bytes, until released
  int64_t produced = 0;                        // items handed to the queue (the next item's index)
  int64_t consumed = 0;    // results taken by the calling thread (the next result's index)
  int64_t held_items = 0;  // admitted and not yet released (released after consume returns)
  int64_t held_bytes = 0;  // their bytes
  InFlightStats peak;
  bool producer_done = false;
  bool stop = false;
  std::exception_ptr error;

  auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(mu);
    if (!error) error = e;
    stop = true;
    cv_work.notify_all();
    cv_space.notify_all();
    cv_done.notify_all();
  };
  auto thread_error = [](const std::system_error& e, int n) {
    return std::runtime_error("cannot start " + std::to_string(n) + " worker threads: " + e.what());
  };
  // Room for one more item of `b` bytes (under the lock).
  auto room_for = [&](int64_t b) {
    if (held_items == 0) return true;
    if (held_items >= max_in_flight) return false;
    return max_bytes <= 0 || held_bytes + b <= max_bytes;
  };

  std::thread producer;
  try {
    producer = std::thread([&] {
      try {
        for (;;) {
          if (max_bytes > 0) {  // the next item is read only while the bound has room left
            std::unique_lock<std::mutex> lk(mu);
            cv_space.wait(lk, [&] { return stop || held_items == 0 || held_bytes < max_bytes; });
            if (stop) break;
          }
          Item item;
          if (!produce(item)) break;
          const int64_t b =
              std::max<int64_t>(0, int64_t(item_bytes(static_cast<const Item&>(item))));
          std::unique_lock<std::mutex> lk(mu);
          cv_space.wait(lk, [&] { return stop || room_for(b); });
          if (stop) break;
          held_items += 1;
          held_bytes += b;
          peak.peak_items = std::max(peak.peak_items, held_items);
          peak.peak_bytes = std::max(peak.peak_bytes, held_bytes);
          queue.emplace_back(produced++, std::move(item));
          bytes_of.emplace(produced - 1, b);
          cv_work.notify_one();
        }
      } catch (...) {
        fail(std::current_exception());
      }
      std::lock_guard<std::mutex> lk(mu);
      producer_done = true;
      cv_work.notify_all();
      cv_done.notify_all();
    });
  } catch (const std::system_error& e) {
    throw thread_error(e, workers + 1);
  }

  std::vector<std::thread> pool;
  auto join_all = [&] {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
      cv_work.notify_all();
      cv_space.notify_all();
    }
    if (producer.joinable()) producer.join();
    for (auto& t : pool)
      if (t.joinable()) t.join();
  };

  try {
    for (int w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        for (;;) {
          std::pair<int64_t, Item> job;
          int64_t job_bytes = 0;
          {
            std::unique_lock<std::mutex> lk(mu);
            cv_work.wait(lk, [&] { return stop || !queue.empty() || producer_done; });
            if (stop || queue.empty()) return;
            job = std::move(queue.front());
            queue.pop_front();
            auto bt = bytes_of.find(job.first);
            job_bytes = bt == bytes_of.end() ? 0 : bt->second;
          }
          try {
            Result res = work(std::move(job.second));
            job.second = Item();  // the item's memory is returned before the heap is trimmed
            if (job_bytes >= kReturnHeapAfterBytes) return_free_heap_memory();
            std::lock_guard<std::mutex> lk(mu);
            results.emplace(job.first, std::move(res));
            cv_done.notify_all();
          } catch (...) {
            fail(std::current_exception());
            return;
          }
        }
      });
    }
  } catch (const std::system_error& e) {  // a worker thread could not be started
    join_all();
    throw thread_error(e, workers);
  } catch (...) {
    join_all();
    throw;
  }

  try {
    for (;;) {
      idle();
      std::optional<Result> res;
      int64_t res_bytes = 0;
      {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
          if (error) std::rethrow_exception(error);
          if (results.count(consumed)) break;
          if (producer_done && consumed >= produced) break;
          cv_done.wait_for(lk, idle_every);
          lk.unlock();
          idle();
          lk.lock();
        }
        auto it = results.find(consumed);
        if (it == results.end()) break;  // every item has been consumed
        res.emplace(std::move(it->second));
        results.erase(it);
        auto bt = bytes_of.find(consumed);
        if (bt != bytes_of.end()) {
          res_bytes = bt->second;
          bytes_of.erase(bt);
        }
        ++consumed;
      }
      consume(std::move(*res));
      res.reset();  // the result's memory is returned before its bytes are
      if (res_bytes >= kReturnHeapAfterBytes) return_free_heap_memory();
      {
        std::lock_guard<std::mutex> lk(mu);
        held_items -= 1;
        held_bytes -= res_bytes;
        cv_space.notify_one();
      }
    }
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
  if (stats) *stats = peak;
  if (error) std::rethrow_exception(error);
}

/// run_ordered with an item bound only (no byte bound).
template <class Item, class Result, class Produce, class Work, class Consume, class Idle>
void run_ordered(int workers, int64_t max_in_flight, Produce&& produce, Work&& work,
                 Consume&& consume, Idle&& idle,
                 std::chrono::milliseconds idle_every = std::chrono::milliseconds(200)) {
  run_ordered<Item, Result>(
      workers, InFlightLimit{max_in_flight, 0}, [](const Item&) { return int64_t(0); },
      std::forward<Produce>(produce), std::forward<Work>(work), std::forward<Consume>(consume),
      std::forward<Idle>(idle), nullptr, idle_every);
}

/// run_ordered without an idle callback.
template <class Item, class Result, class Produce, class Work, class Consume>
void run_ordered(int workers, int64_t max_in_flight, Produce&& produce, Work&& work,
                 Consume&& consume) {
  run_ordered<Item, Result>(workers, max_in_flight, std::forward<Produce>(produce),
                            std::forward<Work>(work), std::forward<Consume>(consume), [] {});
}

}  // namespace lcm::data
