// core/work_split.h: every item is claimed exactly once, owners walk their range front to back,
// threads that are done take the others' items from the back; with OS threads racing on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "core/work_split.h"

namespace snapkv {
namespace {

/// All claims of thread `me` until next() says there is nothing left.
std::vector<int64_t> drain(WorkSplit& s, int me) {
  std::vector<int64_t> got;
  int64_t item = -1;
  while (s.next(me, item)) got.push_back(item);
  return got;
}

TEST(WorkSplit, OneThreadTakesItsRangeThenTheOthersFromTheBack) {
  WorkSplit s;
  s.reset(10, 3);  // ranges [0, 3), [3, 6), [6, 10)
  ASSERT_EQ(s.parts(), 3);
  // Thread 1: its own range front to back, then range 2 from the back, then range 0 from the back.
  EXPECT_EQ(drain(s, 1), (std::vector<int64_t>{3, 4, 5, 9, 8, 7, 6, 2, 1, 0}));
  int64_t item = -1;
  EXPECT_FALSE(s.next(0, item));
  EXPECT_FALSE(s.next(2, item));
}

TEST(WorkSplit, RangesFromStarts) {
  WorkSplit s;
  const int64_t starts[] = {0, 0, 5, 7};  // range 0 empty, range 1 [0, 5), range 2 [5, 7)
  s.reset_at(3, [&](int p) { return starts[p]; });
  int64_t item = -1;
  ASSERT_TRUE(s.next(2, item));
  EXPECT_EQ(item, 5);
  EXPECT_EQ(drain(s, 0), (std::vector<int64_t>{4, 3, 2, 1, 0, 6}));  // nothing of its own: steals
}

TEST(WorkSplit, EmptyAndTinyLoops) {
  WorkSplit s;
  s.reset(0, 4);
  int64_t item = -1;
  for (int me = 0; me < 6; ++me) EXPECT_FALSE(s.next(me, item));
  s.reset(2, 4);  // two empty ranges, two of one item
  std::vector<int64_t> all;
  for (int me = 0; me < 4; ++me)
    for (int64_t i : drain(s, me)) all.push_back(i);
  EXPECT_EQ(all.size(), 2u);
  s.reset(5, 0);  // parts clamped to 1
  EXPECT_EQ(s.parts(), 1);
  EXPECT_EQ(drain(s, 3), (std::vector<int64_t>{4, 3, 2, 1, 0}));  // a thread beyond the ranges steals
}

TEST(WorkSplit, PartsAreCapped) {
  WorkSplit s;
  s.reset(1000, 200);
  EXPECT_EQ(s.parts(), WorkSplit::kMaxParts);
  EXPECT_FALSE(WorkSplit::suits(1));
  EXPECT_TRUE(WorkSplit::suits(2));
  EXPECT_TRUE(WorkSplit::suits(WorkSplit::kMaxParts));
  EXPECT_FALSE(WorkSplit::suits(WorkSplit::kMaxParts + 1));
  // Thread 0 owns [0, 1000 / kMaxParts): its first claims are 0, 1, 2.
  int64_t item = -1;
  for (int64_t want = 0; want < 3; ++want) {
    ASSERT_TRUE(s.next(0, item));
    EXPECT_EQ(item, want);
  }
}

TEST(WorkSplit, NothingBeforeTheFirstReset) {
  WorkSplit s;
  int64_t item = -1;
  EXPECT_EQ(s.parts(), 0);
  EXPECT_FALSE(s.next(0, item));
}

TEST(WorkSplit, RacingThreadsClaimEveryItemOnce) {
  // The threads start together and do different amounts of "work" per item, so owners and
  // thieves meet in the middle of ranges; more threads than ranges, and fewer.
  for (const int parts : {1, 2, 3, 8}) {
    for (const int threads : {1, 2, 4, 9}) {
      constexpr int64_t kItems = 20000;
      WorkSplit s;
      s.reset(kItems, parts);
      std::vector<std::atomic<int>> seen(kItems);
      std::vector<std::thread> team;
      std::latch start(threads);
      for (int me = 0; me < threads; ++me) {
        team.emplace_back([&, me] {
          start.arrive_and_wait();
          int64_t item = -1;
          volatile uint64_t spin = 0;
          while (s.next(me, item)) {
            seen[static_cast<size_t>(item)].fetch_add(1, std::memory_order_relaxed);
            for (int k = 0; k < (me + 1) * 20; ++k) spin = spin + 1;  // thread me is (me + 1)x slower
          }
        });
      }
      for (auto& t : team) t.join();
      for (int64_t i = 0; i < kItems; ++i)
        ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1)
            << "item " << i << " parts " << parts << " threads " << threads;
    }
  }
}

TEST(WorkSplit, AFastThreadTakesASlowThreadsItems) {
  // Thread 1 needs >= 1 ms per item, thread 0 nothing: thread 0 finishes its range long before
  // and takes items of range 1 from its back; every item still goes to exactly one thread.
  WorkSplit s;
  s.reset(400, 2);  // ranges [0, 200) and [200, 400)
  std::vector<int64_t> got[2];
  std::latch start(2);
  std::thread slow([&] {
    start.arrive_and_wait();
    int64_t item = -1;
    while (s.next(1, item)) {
      got[1].push_back(item);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  start.arrive_and_wait();
  got[0] = drain(s, 0);
  slow.join();
  std::vector<int64_t> all(got[0]);
  all.insert(all.end(), got[1].begin(), got[1].end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 400u);
  for (int64_t i = 0; i < 400; ++i) ASSERT_EQ(all[static_cast<size_t>(i)], i);
  // Thread 1's whole range takes >= 200 ms (a loaded sanitizer run included); thread 0 only has
  // to run once in that time to steal.
  EXPECT_GT(std::count_if(got[0].begin(), got[0].end(), [](int64_t i) { return i >= 200; }), 0);
  if (!got[1].empty()) {
    EXPECT_EQ(got[1].front(), 200);  // the slow thread starts at its range's front
  }
}

TEST(WorkSplit, SwitchReadsTheEnvironment) {
  EXPECT_TRUE(work_stealing_enabled("SNAPKV_TEST_WORK_SPLIT_UNSET_SWITCH"));
  ::setenv("SNAPKV_TEST_WORK_SPLIT_SWITCH", "0", 1);
  EXPECT_FALSE(work_stealing_enabled("SNAPKV_TEST_WORK_SPLIT_SWITCH"));
  ::setenv("SNAPKV_TEST_WORK_SPLIT_SWITCH", "1", 1);
  EXPECT_TRUE(work_stealing_enabled("SNAPKV_TEST_WORK_SPLIT_SWITCH"));
  ::unsetenv("SNAPKV_TEST_WORK_SPLIT_SWITCH");
}

}  // namespace
}  // namespace snapkv
