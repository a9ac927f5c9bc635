// A minimal task loop over std::thread workers, for the CPU code of the library and its tests.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace bsgemm::cpu {

// `requested` threads, or every hardware thread when it is 0 (at least one).
inline int resolve_thread_count(int requested) {
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

// Calls fn(task, worker) for every task in [0, count) on up to `threads` threads (0: all), the
// calling thread being worker 0. Workers pull the next task from one atomic counter, so tasks of
// uneven cost balance by themselves. When a thread cannot be started the others do its share.
// The first exception fn throws stops the hand-out of further tasks and is rethrown here once
// every worker has returned.
template <class Fn>
void parallel_for(std::int64_t count, int threads, Fn&& fn) {
  if (count <= 0) return;
  const int workers = static_cast<int>(std::min<std::int64_t>(resolve_thread_count(threads), count));
  std::atomic<std::int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&](int worker) {
    try {
      for (std::int64_t task = next.fetch_add(1, std::memory_order_relaxed); task < count;
           task = next.fetch_add(1, std::memory_order_relaxed))
        fn(task, worker);
    } catch (...) {
      next.store(count, std::memory_order_relaxed);
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(workers - 1));
  for (int worker = 1; worker < workers; ++worker) {
    try {
      pool.emplace_back(work, worker);
    } catch (const std::system_error&) {
      break;
    }
  }
  work(0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

// The range that task `task` falls in, given each range's first task in order and the total count at the
// end (tasks handed out over several ranges of uneven size, e.g. one per group and batch).
inline std::size_t range_of_task(const std::vector<std::int64_t>& first_task, std::int64_t task) {
  const auto after = std::upper_bound(first_task.begin(), first_task.end(), task);
  return static_cast<std::size_t>(after - first_task.begin()) - 1;
}

}  // namespace bsgemm::cpu
