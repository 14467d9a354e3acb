// Tests of run_ordered (data/ordered_pool.hpp): results in input order whatever the thread count
// and timing, the bound on items in flight, and that an exception from the producer, a worker or
// the consumer stops the run and reaches the caller.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data/ordered_pool.hpp"

using lcm::data::run_ordered;

namespace {

/// Runs 0..n-1 through a pool whose work squares the item after a delay that varies per item,
/// so that later items often finish first; returns what the consumer saw.
std::vector<int64_t> squares(int workers, int64_t n, int64_t max_in_flight) {
  int64_t next = 0;
  std::vector<int64_t> seen;
  run_ordered<int64_t, int64_t>(
      workers, max_in_flight,
      [&](int64_t& item) {
        if (next >= n) return false;
        item = next++;
        return true;
      },
      [](int64_t x) {
        std::this_thread::sleep_for(std::chrono::microseconds((x * 7919) % 300));
        return x * x;
      },
      [&](int64_t r) { seen.push_back(r); });
  return seen;
}

}  // namespace

TEST_CASE("run_ordered: results reach the consumer in input order for any thread count") {
  for (int workers : {1, 2, 5}) {
    const std::vector<int64_t> seen = squares(workers, 200, 7);
    REQUIRE(seen.size() == 200);
    for (int64_t i = 0; i < 200; ++i) CHECK(seen[size_t(i)] == i * i);
  }
  CHECK(squares(3, 0, 4).empty());
}

TEST_CASE("run_ordered: at most max_in_flight items between producing and consuming") {
  std::atomic<int64_t> produced{0}, consumed{0}, worst{0};
  int64_t next = 0;
  run_ordered<int64_t, int64_t>(
      4, 5,
      [&](int64_t& item) {
        if (next >= 300) return false;
        item = next++;
        return true;
      },
      [&](int64_t x) {
        const int64_t now = ++produced - consumed.load();
        int64_t w = worst.load();
        while (now > w && !worst.compare_exchange_weak(w, now)) {
        }
        return x;
      },
      [&](int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        ++consumed;
      });
  CHECK(consumed.load() == 300);
  // 5 in flight, plus the one result handed over but not yet counted by the consumer.
  CHECK(worst.load() <= 5 + 1);
}

TEST_CASE("run_ordered: an exception from produce, work or consume is rethrown to the caller") {
  auto run = [](int fail_in, int64_t fail_at, int64_t& consumed) {
    int64_t next = 0;
    consumed = 0;
    run_ordered<int64_t, int64_t>(
        3, 4,
        [&](int64_t& item) {
          if (fail_in == 0 && next == fail_at) throw std::runtime_error("produce failed");
          if (next >= 100) return false;
          item = next++;
          return true;
        },
        [&](int64_t x) {
          if (fail_in == 1 && x == fail_at) throw std::runtime_error("work failed");
          return x;
        },
        [&](int64_t x) {
          if (fail_in == 2 && x == fail_at) throw std::runtime_error("consume failed");
          ++consumed;
        });
  };
  int64_t consumed = 0;
  CHECK_THROWS_WITH(run(0, 40, consumed), "produce failed");
  CHECK(consumed <= 40);
  CHECK_THROWS_WITH(run(1, 40, consumed), "work failed");
  CHECK(consumed <= 40);
  CHECK_THROWS_WITH(run(2, 40, consumed), "consume failed");
  CHECK(consumed == 40);
  run(3, 0, consumed);  // no failure
  CHECK(consumed == 100);
}

TEST_CASE("run_ordered: idle runs on the calling thread while it waits") {
  const std::thread::id caller = std::this_thread::get_id();
  int idle_calls = 0;
  bool idle_on_caller = true;
  int64_t next = 0;
  run_ordered<int64_t, int64_t>(
      2, 2,
      [&](int64_t& item) {
        if (next >= 3) return false;
        item = next++;
        return true;
      },
      [](int64_t x) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return x;
      },
      [](int64_t) {},
      [&] {
        ++idle_calls;
        idle_on_caller = idle_on_caller && std::this_thread::get_id() == caller;
      },
      std::chrono::milliseconds(5));
  CHECK(idle_on_caller);
  CHECK(idle_calls > 3);  // once per result at least, and again on each 5 ms wait
}
