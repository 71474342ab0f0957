// The resolver's admission (#32): per-source caps, bounded queues, round robin.
#include "fair_queue.h"

#include <gtest/gtest.h>

namespace pvs::resolver {
namespace {

using Admit = FairQueue::Admit;

TEST(FairQueue, CapsASourceAndQueuesThenDrops) {
  FairQueue q(10, 2, 3);
  EXPECT_EQ(q.submit(1, 100), Admit::kStart);
  EXPECT_EQ(q.submit(1, 101), Admit::kStart);
  for (std::uint64_t j = 102; j < 105; ++j) EXPECT_EQ(q.submit(1, j), Admit::kQueued);
  EXPECT_EQ(q.submit(1, 105), Admit::kDropped);
  EXPECT_EQ(q.submit(2, 200), Admit::kStart);  // another source has its own slots
  auto next = q.finish(1);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->job, 102u);
  EXPECT_EQ(q.inflight(1), 2u);
  EXPECT_EQ(q.queued(1), 2u);
}

TEST(FairQueue, FreedSlotsGoRoundRobinAcrossWaitingSources) {
  FairQueue q(2, 2, 10);
  EXPECT_EQ(q.submit(1, 10), Admit::kStart);
  EXPECT_EQ(q.submit(1, 11), Admit::kStart);
  for (std::uint64_t j = 12; j < 16; ++j) EXPECT_EQ(q.submit(1, j), Admit::kQueued);
  EXPECT_EQ(q.submit(2, 20), Admit::kQueued);
  EXPECT_EQ(q.submit(2, 21), Admit::kQueued);
  EXPECT_EQ(q.submit(3, 30), Admit::kQueued);
  std::vector<std::uint32_t> order;
  std::uint32_t finishing = 1;
  for (int i = 0; i < 6; ++i) {
    auto next = q.finish(finishing);
    ASSERT_TRUE(next);
    order.push_back(next->source);
    finishing = next->source;
  }
  EXPECT_EQ(order, (std::vector<std::uint32_t>{1, 2, 3, 1, 2, 1}));
  EXPECT_LE(q.inflight(), 2u);
}

TEST(FairQueue, ForgetsIdleSources) {
  FairQueue q(4, 1, 0);
  EXPECT_EQ(q.submit(7, 1), Admit::kStart);
  EXPECT_EQ(q.submit(7, 2), Admit::kDropped);
  EXPECT_FALSE(q.finish(7));
  EXPECT_EQ(q.inflight(), 0u);
  EXPECT_EQ(q.inflight(7), 0u);
  EXPECT_EQ(q.submit(7, 3), Admit::kStart);
}

TEST(FairQueue, AllQueuesTogetherAreBounded) {
  FairQueue q(1, 1, 100);
  std::uint64_t job = 0;
  EXPECT_EQ(q.submit(0, job++), Admit::kStart);
  std::size_t queued = 0;
  for (std::uint32_t source = 1; source < 200; ++source) {
    for (int i = 0; i < 100; ++i) queued += q.submit(source, job++) == Admit::kQueued ? 1 : 0;
  }
  EXPECT_EQ(queued, FairQueue::kMaxQueuedTotal);
  ASSERT_TRUE(q.finish(0));  // a slot frees: one queued job starts, one place in the queues frees
  EXPECT_EQ(q.submit(500, job++), Admit::kQueued);
  EXPECT_EQ(q.submit(501, job++), Admit::kDropped);
}

}  // namespace
}  // namespace pvs::resolver
