// An ordered work pool: items from one sequential producer are processed by N worker threads at
// once and their results are handed to the calling thread in input order, with a bounded number
// of items in flight. Used by the prepare pipeline (records → features) and the synth writer.
#pragma once
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

namespace lcm::data {

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
/// Memory: at most `max_in_flight` (values < 1 mean 1) items are produced and not yet consumed,
/// plus the one being produced; results wait for their turn within that bound.
/// Errors: the first exception thrown by produce, work or consume (the first in time) stops the
/// run: nothing more is produced, worked on or consumed (results still pending are dropped), all
/// threads are joined, and run_ordered rethrows that exception on the calling thread. When a
/// thread cannot be started, the threads already running are stopped and joined and it throws
/// std::runtime_error "cannot start N worker threads: <why>" (N = workers + 1 when the producer
/// thread fails, else workers). Returns after the last result is consumed and every thread has
/// ended. Item must be default-constructible, Item and Result movable.
template <class Item, class Result, class Produce, class Work, class Consume, class Idle>
void run_ordered(int workers, int64_t max_in_flight, Produce&& produce, Work&& work,
                 Consume&& consume, Idle&& idle,
                 std::chrono::milliseconds idle_every = std::chrono::milliseconds(200)) {
  if (workers < 1) workers = 1;
  if (max_in_flight < 1) max_in_flight = 1;
  std::mutex mu;
  std::condition_variable cv_work, cv_space, cv_done;
  std::deque<std::pair<int64_t, Item>> queue;  // produced, not yet taken by a worker
  std::map<int64_t, Result> results;           // worked on, not yet consumed
  int64_t produced = 0;                        // items handed to the queue (the next item's index)
  int64_t consumed = 0;  // results taken by the calling thread (the next result's index)
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

  std::thread producer;
  try {
    producer = std::thread([&] {
      try {
        for (;;) {
          Item item;
          if (!produce(item)) break;
          std::unique_lock<std::mutex> lk(mu);
          cv_space.wait(lk, [&] { return stop || produced - consumed < max_in_flight; });
          if (stop) break;
          queue.emplace_back(produced++, std::move(item));
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
          {
            std::unique_lock<std::mutex> lk(mu);
            cv_work.wait(lk, [&] { return stop || !queue.empty() || producer_done; });
            if (stop || queue.empty()) return;
            job = std::move(queue.front());
            queue.pop_front();
          }
          try {
            Result res = work(std::move(job.second));
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
        ++consumed;
        cv_space.notify_one();
      }
      consume(std::move(*res));
    }
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
  if (error) std::rethrow_exception(error);
}

/// run_ordered without an idle callback.
template <class Item, class Result, class Produce, class Work, class Consume>
void run_ordered(int workers, int64_t max_in_flight, Produce&& produce, Work&& work,
                 Consume&& consume) {
  run_ordered<Item, Result>(workers, max_in_flight, std::forward<Produce>(produce),
                            std::forward<Work>(work), std::forward<Consume>(consume), [] {});
}

}  // namespace lcm::data
