// Tests of run_ordered (data/ordered_pool.hpp): results in input order whatever the thread count
// and timing, the bound on items in flight, and that an exception from the producer, a worker or
// the consumer stops the run and reaches the caller.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data/ordered_pool.hpp"

using lcm::data::run_ordered;

namespace {

/// A run_ordered producer that hands out `next`, `next` + 1, ..., `n` - 1 (advancing `next`).
auto count_to(int64_t& next, int64_t n) {
  return [&next, n](int64_t& item) {
    if (next >= n) return false;
    item = next++;
    return true;
  };
}

/// Runs 0..n-1 through a pool whose work squares the item after a delay that varies per item,
/// so that later items often finish first; returns what the consumer saw.
std::vector<int64_t> squares(int workers, int64_t n, int64_t max_in_flight) {
  int64_t next = 0;
  std::vector<int64_t> seen;
  run_ordered<int64_t, int64_t>(
      workers, max_in_flight, count_to(next, n),
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
      4, 5, count_to(next, 300),
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
      2, 2, count_to(next, 3),
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

TEST_CASE("run_ordered: the bytes in flight never exceed the byte bound over random item sizes") {
  // Items of random sizes (some heavier than the bound); the test counts, on its own side, the
  // bytes of the items produced and not yet consumed each time the producer is asked for the
  // next item (every earlier item has then been admitted): below the bound, or none in flight.
  std::mt19937_64 rng(20261207);
  for (int round = 0; round < 12; ++round) {
    const int workers = 1 + int(rng() % 6);
    const int64_t bound = 1000 + int64_t(rng() % 20000);
    const int64_t n = 400 + int64_t(rng() % 400);
    std::vector<int64_t> size(static_cast<size_t>(n));
    int64_t heaviest = 0;
    for (auto& s : size) {
      s = rng() % 10 == 0 ? bound + int64_t(rng() % (2 * bound)) : 1 + int64_t(rng() % (bound / 3));
      heaviest = std::max(heaviest, s);
    }
    std::atomic<int64_t> produced_bytes{0}, consumed_bytes{0}, produced_items{0}, consumed_items{0};
    int64_t worst = 0, worst_items = 0, violations = 0;
    int64_t next = 0;
    std::vector<int64_t> seen;
    lcm::data::InFlightStats stats;
    lcm::data::run_ordered<int64_t, int64_t>(
        workers, lcm::data::InFlightLimit{64, bound},
        [&](const int64_t& i) { return size[size_t(i)]; },
        [&](int64_t& item) {
          const int64_t bytes = produced_bytes.load() - consumed_bytes.load();
          const int64_t items = produced_items.load() - consumed_items.load();
          // admitted: at most the bound, or one item alone; and the next item is read only while
          // the bound has room left (nothing is read beside a heavy item)
          if (bytes > bound && items > 1) ++violations;
          if (items > 0 && bytes >= bound) ++violations;
          worst = std::max(worst, bytes);
          worst_items = std::max(worst_items, items);
          if (next >= n) return false;
          item = next++;
          produced_bytes += size[size_t(item)];
          ++produced_items;
          return true;
        },
        [&](int64_t i) {
          if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(30));
          return i;
        },
        [&](int64_t i) {
          if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(40));
          seen.push_back(i);
          consumed_bytes += size[size_t(i)];
          ++consumed_items;
        },
        [] {}, &stats);
    INFO("round " << round << ", workers " << workers << ", bound " << bound);
    REQUIRE(int64_t(seen.size()) == n);
    for (int64_t i = 0; i < n; ++i) CHECK(seen[size_t(i)] == i);
    CHECK(violations == 0);
    CHECK(worst <= std::max(bound, heaviest));
    CHECK(stats.peak_bytes <= std::max(bound, heaviest));
    CHECK(stats.peak_items <= 64);
    CHECK(stats.peak_items >= 1);
  }
}

TEST_CASE("run_ordered: an item heavier than the byte bound runs alone") {
  // Every item weighs more than the bound: each is admitted only when nothing is in flight.
  std::atomic<int64_t> in_flight{0}, worst{0};
  int64_t next = 0;
  lcm::data::InFlightStats stats;
  lcm::data::run_ordered<int64_t, int64_t>(
      3, lcm::data::InFlightLimit{16, 100}, [](const int64_t&) { return int64_t(500); },
      count_to(next, 50),
      [&](int64_t i) {
        const int64_t now = ++in_flight;  // only one worker ever runs
        if (now > worst.load()) worst.store(now);
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        --in_flight;
        return i;
      },
      [](int64_t) {}, [] {}, &stats);
  CHECK(stats.peak_items == 1);
  CHECK(stats.peak_bytes == 500);
  CHECK(worst == 1);
}
