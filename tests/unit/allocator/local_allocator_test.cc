#include "allocator/local_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "allocator/import.h"
#include "base/clock.h"
#include "state/export_file.h"
#include "state/store.h"
#include "tests/unit/testing/temp_dir.h"

namespace kleaf::allocator {
namespace {

constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr auto kTimeout = std::chrono::seconds(10);

// Records every completion of one callback: how often it ran, on which thread, with what.
template <typename T>
class Outcome {
 public:
  Callback<T> Done() {
    return [this](Result<T> r) {
      std::lock_guard lock(mu_);
      ++calls_;
      thread_ = std::this_thread::get_id();
      result_ = std::move(r);
      cv_.notify_all();
    };
  }
  // Waits (bounded) for the first completion and returns it.
  const Result<T>& Wait() {
    std::unique_lock lock(mu_);
    bool done = cv_.wait_for(lock, kTimeout, [this] { return calls_ > 0; });
    EXPECT_TRUE(done) << "callback not called within " << kTimeout.count() << " s";
    if (!done) result_ = Fail(Code::kInternal, "timed out");
    return *result_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::thread::id thread() {
    std::lock_guard lock(mu_);
    return thread_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  std::thread::id thread_;
  std::optional<Result<T>> result_;
};

// Asserts that no two segments share an ID and, when `contiguous`, that together they cover
// [first start, last end) without holes (one allocator, one tag).
void ExpectDisjoint(std::vector<Segment> segments, bool contiguous) {
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.start < b.start; });
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_LT(segments[i].start, segments[i].end);
    if (i == 0) continue;
    EXPECT_LE(segments[i - 1].end, segments[i].start)
        << "[" << segments[i - 1].start << "," << segments[i - 1].end << ") overlaps ["
        << segments[i].start << "," << segments[i].end << ")";
    if (contiguous) {
      EXPECT_EQ(segments[i - 1].end, segments[i].start);
    }
  }
}

TagUpdate WithStep(int64_t step) {
  TagUpdate u;
  u.step = step;
  return u;
}

TagUpdate WithMaxId(int64_t max_id) {
  TagUpdate u;
  u.max_id = max_id;
  return u;
}

LocalAllocatorOptions Options(int64_t max_step, int64_t default_step, bool auto_create) {
  LocalAllocatorOptions o;
  o.max_step = max_step;
  o.default_step = default_step;
  o.auto_create = auto_create;
  return o;
}

class LocalAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(LocalAllocatorOptions options = {}) {
    options_ = options;
    allocator_.reset();
    store_.reset();
    auto s = state::Store::Open(dir_.Sub("state"));
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
    allocator_ = std::make_unique<LocalAllocator>(*store_, clock_, options_);
  }

  void CreateTag(const std::string& tag, int64_t step) {
    auto r = allocator_->PutTagNow(tag, WithStep(step));
    ASSERT_TRUE(r) << r.error().message;
  }

  state::TagRecord Stored(const std::string& tag) {
    auto r = store_->GetTag(tag);
    EXPECT_TRUE(r && r->has_value()) << "no record of " << tag;
    return r && r->has_value() ? **r : state::TagRecord{};
  }

  testing::TempDir dir_;
  ManualClock clock_{kStartMs};
  LocalAllocatorOptions options_;
  std::unique_ptr<state::Store> store_;
  std::unique_ptr<LocalAllocator> allocator_;
};

TEST_F(LocalAllocatorTest, AllocatesAdjacentSegmentsOfTheTagStep) {
  CreateTag("order", 100);
  auto a = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->tag, "order");
  EXPECT_EQ(a->start, 1);
  EXPECT_EQ(a->end, 101);
  EXPECT_EQ(a->min_step, 100);
  auto b = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->start, 101);
  EXPECT_EQ(b->end, 201);
}

TEST_F(LocalAllocatorTest, NewMaxIdIsInTheStoreWhenTheSegmentIsReturned) {
  CreateTag("order", 100);
  clock_.Advance(std::chrono::milliseconds(5));
  auto s = allocator_->AllocateSegmentNow("order", 300);
  ASSERT_TRUE(s);
  state::TagRecord stored = Stored("order");
  EXPECT_EQ(stored.max_id, s->end);
  EXPECT_EQ(stored.step, 100);
  EXPECT_EQ(stored.update_time_ms, kStartMs + 5);
}

TEST_F(LocalAllocatorTest, RequestedStepIsClampedToTheTagStepAndMaxStep) {
  Open(Options(500, 100, false));
  CreateTag("order", 100);
  auto big = allocator_->AllocateSegmentNow("order", 10'000);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->size(), 500);
  auto small = allocator_->AllocateSegmentNow("order", 3);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->size(), 100);
}

TEST_F(LocalAllocatorTest, UnknownTagIsNotFoundAndNotCreated) {
  auto r = allocator_->AllocateSegmentNow("nope", 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
  auto stored = store_->GetTag("nope");
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->has_value());
}

TEST_F(LocalAllocatorTest, InvalidTagIsInvalidArgument) {
  for (const std::string& bad : std::vector<std::string>{"", "a b", "a/b", std::string(129, 'x')}) {
    SCOPED_TRACE(bad);
    auto a = allocator_->AllocateSegmentNow(bad, 0);
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, Code::kInvalidArgument);
    auto p = allocator_->PutTagNow(bad, TagUpdate{});
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, Code::kInvalidArgument);
  }
}

TEST_F(LocalAllocatorTest, AutoCreateMakesUnknownTagsWithTheDefaultStep) {
  Open(Options(1000000, 25, true));
  auto s = allocator_->AllocateSegmentNow("fresh", 0);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->start, 1);
  EXPECT_EQ(s->end, 26);
  state::TagRecord stored = Stored("fresh");
  EXPECT_EQ(stored.step, 25);
  EXPECT_EQ(stored.max_id, 26);
  EXPECT_FALSE(stored.deleted);
}

TEST_F(LocalAllocatorTest, PutTagLoweringMaxIdIsRefusedAndLeavesTheStore) {
  CreateTag("order", 100);
  ASSERT_TRUE(allocator_->AllocateSegmentNow("order", 0));
  auto r = allocator_->PutTagNow("order", WithMaxId(50));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(Stored("order").max_id, 101);
}

TEST_F(LocalAllocatorTest, PutTagRaisingMaxIdMovesTheNextSegment) {
  CreateTag("order", 10);
  auto r = allocator_->PutTagNow("order", WithMaxId(1'000'000));
  ASSERT_TRUE(r);
  auto s = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->start, 1'000'000);
}

TEST_F(LocalAllocatorTest, DeletedTagIsNotFoundAndKeepsItsMaxId) {
  CreateTag("order", 100);
  ASSERT_TRUE(allocator_->AllocateSegmentNow("order", 0));
  Outcome<state::TagRecord> deleted;
  allocator_->Run(op::DeleteTag{"order"}, deleted.Done());
  const auto& before = deleted.Wait();
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_FALSE(before->deleted);  // the record as it was
  EXPECT_EQ(before->max_id, 101);

  auto r = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
  state::TagRecord stored = Stored("order");
  EXPECT_TRUE(stored.deleted);
  EXPECT_EQ(stored.max_id, 101);
}

TEST_F(LocalAllocatorTest, RecreatedTagContinuesAboveItsEarlierLife) {
  CreateTag("order", 100);
  auto first = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(first);
  Outcome<state::TagRecord> deleted;
  allocator_->Run(op::DeleteTag{"order"}, deleted.Done());
  ASSERT_TRUE(deleted.Wait());
  CreateTag("order", 100);
  auto again = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(again);
  EXPECT_GE(again->start, first->end);
}

TEST_F(LocalAllocatorTest, AutoCreateOfADeletedTagContinuesAboveIt) {
  Open(Options(1000000, 10, true));
  auto first = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(first);
  Outcome<state::TagRecord> deleted;
  allocator_->Run(op::DeleteTag{"order"}, deleted.Done());
  ASSERT_TRUE(deleted.Wait());
  auto again = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_GE(again->start, first->end);
}

TEST_F(LocalAllocatorTest, ConcurrentAllocationsOfOneTagGetDisjointSegments) {
  CreateTag("order", 10);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<std::vector<Segment>> got(kThreads);
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        auto s = allocator_->AllocateSegmentNow("order", (t + i) % 3 == 0 ? 0 : 10 * (t + 1));
        if (s) {
          got[t].push_back(*s);
        } else {
          failures.fetch_add(1);
        }
      }
    });
  }
  go.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<Segment> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kPerThread});
  ExpectDisjoint(all, /*contiguous=*/true);
  int64_t max_end = 0;
  for (const auto& s : all) max_end = std::max(max_end, s.end);
  EXPECT_EQ(Stored("order").max_id, max_end);
}

TEST_F(LocalAllocatorTest, ConcurrentAsyncAllocationsCompleteOnceAndAreDisjoint) {
  CreateTag("order", 7);
  constexpr int kCalls = 60;
  std::vector<std::unique_ptr<Outcome<Segment>>> outcomes;
  for (int i = 0; i < kCalls; ++i) outcomes.push_back(std::make_unique<Outcome<Segment>>());
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += 3) {
        allocator_->AllocateSegment("order", 0, outcomes[i]->Done());
      }
    });
  }
  for (auto& c : callers) c.join();
  std::vector<Segment> all;
  for (auto& o : outcomes) {
    const auto& r = o->Wait();
    ASSERT_TRUE(r) << r.error().message;
    all.push_back(*r);
  }
  allocator_->Stop();
  for (auto& o : outcomes) EXPECT_EQ(o->calls(), 1);
  ExpectDisjoint(all, /*contiguous=*/true);
}

// Redpanda's id_allocator_stm_test shape: allocate, crash, restart, allocate; everything after the
// restart is strictly above everything before it.
TEST_F(LocalAllocatorTest, RestartContinuesStrictlyAboveEverythingHandedOut) {
  CreateTag("order", 50);
  CreateTag("user", 5);
  std::vector<Segment> before;
  int64_t highest_id = 0;
  for (int restart = 0; restart < 4; ++restart) {
    SCOPED_TRACE(restart);
    std::vector<Segment> now;
    for (int i = 0; i < 5; ++i) {
      for (const char* tag : {"order", "user"}) {
        auto s = allocator_->AllocateSegmentNow(tag, i * 20);
        ASSERT_TRUE(s) << s.error().message;
        if (std::string(tag) == "order") {
          EXPECT_GT(s->start, highest_id) << "an ID of 'order' was handed out twice";
          now.push_back(*s);
        }
      }
    }
    Outcome<Segment> async;
    allocator_->AllocateSegment("order", 0, async.Done());
    ASSERT_TRUE(async.Wait());
    now.push_back(*async.Wait());
    for (const auto& s : now) {
      EXPECT_GT(s.start, highest_id);
      highest_id = std::max(highest_id, s.end - 1);
    }
    before.insert(before.end(), now.begin(), now.end());
    // Crash: the process goes away; only what is in the store survives.
    Open();
  }
  ExpectDisjoint(before, /*contiguous=*/false);
  auto after = allocator_->AllocateSegmentNow("order", 0);
  ASSERT_TRUE(after);
  EXPECT_GT(after->start, highest_id);
}

TEST_F(LocalAllocatorTest, AsyncCallbacksRunOnceOffTheCallersThread) {
  CreateTag("order", 10);
  Outcome<Segment> segment;
  Outcome<std::vector<state::TagRecord>> list;
  Outcome<state::TagRecord> get;
  Outcome<state::TagRecord> put;
  allocator_->AllocateSegment("order", 0, segment.Done());
  allocator_->Run(op::ListTags{}, list.Done());
  allocator_->Run(op::GetTag{"order"}, get.Done());
  allocator_->Run(op::PutTag{"other", WithStep(3)}, put.Done());
  ASSERT_TRUE(segment.Wait());
  ASSERT_TRUE(list.Wait());
  ASSERT_TRUE(get.Wait());
  ASSERT_TRUE(put.Wait());
  allocator_->Stop();
  const auto me = std::this_thread::get_id();
  EXPECT_EQ(segment.calls(), 1);
  EXPECT_EQ(list.calls(), 1);
  EXPECT_EQ(get.calls(), 1);
  EXPECT_EQ(put.calls(), 1);
  EXPECT_NE(segment.thread(), me);
  EXPECT_NE(list.thread(), me);
  EXPECT_NE(get.thread(), me);
  EXPECT_NE(put.thread(), me);
}

TEST_F(LocalAllocatorTest, FailingAsyncCallsAlsoCompleteExactlyOnce) {
  Outcome<Segment> segment;
  Outcome<state::TagRecord> get;
  Outcome<state::TagRecord> del;
  Outcome<state::TagRecord> put;
  Outcome<state::TagRecord> bad_get;
  allocator_->AllocateSegment("nope", 0, segment.Done());
  allocator_->Run(op::GetTag{"nope"}, get.Done());
  allocator_->Run(op::DeleteTag{"nope"}, del.Done());
  allocator_->Run(op::PutTag{"order", WithStep(0)}, put.Done());
  allocator_->Run(op::GetTag{"bad tag"}, bad_get.Done());
  EXPECT_EQ(segment.Wait().error().code, Code::kNotFound);
  EXPECT_EQ(get.Wait().error().code, Code::kNotFound);
  EXPECT_EQ(del.Wait().error().code, Code::kNotFound);
  EXPECT_EQ(put.Wait().error().code, Code::kInvalidArgument);
  EXPECT_EQ(bad_get.Wait().error().code, Code::kInvalidArgument);
  allocator_->Stop();
  EXPECT_EQ(segment.calls(), 1);
  EXPECT_EQ(get.calls(), 1);
  EXPECT_EQ(del.calls(), 1);
  EXPECT_EQ(put.calls(), 1);
  EXPECT_EQ(bad_get.calls(), 1);
}

TEST_F(LocalAllocatorTest, StopDrainsQueuedWorkAndLaterCallsStillComplete) {
  CreateTag("order", 10);
  std::vector<std::unique_ptr<Outcome<Segment>>> queued;
  for (int i = 0; i < 20; ++i) {
    queued.push_back(std::make_unique<Outcome<Segment>>());
    allocator_->AllocateSegment("order", 0, queued.back()->Done());
  }
  allocator_->Stop();
  for (auto& o : queued) EXPECT_EQ(o->calls(), 1);  // no wait: Stop ran them all
  Outcome<Segment> late;
  allocator_->AllocateSegment("order", 0, late.Done());
  EXPECT_EQ(late.calls(), 1);
  ASSERT_TRUE(late.Wait());
  EXPECT_EQ(late.Wait()->start, 201);
}

TEST_F(LocalAllocatorTest, ListTagsIsOrderedAndSkipsDeletedTags) {
  CreateTag("b", 1);
  CreateTag("a", 2);
  CreateTag("c", 3);
  Outcome<state::TagRecord> deleted;
  allocator_->Run(op::DeleteTag{"b"}, deleted.Done());
  ASSERT_TRUE(deleted.Wait());
  Outcome<std::vector<state::TagRecord>> list;
  allocator_->Run(op::ListTags{}, list.Done());
  const auto& r = list.Wait();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].tag, "a");
  EXPECT_EQ((*r)[0].step, 2);
  EXPECT_EQ((*r)[1].tag, "c");
}

TEST_F(LocalAllocatorTest, GetTagOfADeletedTagIsNotFound) {
  CreateTag("order", 10);
  Outcome<state::TagRecord> found;
  allocator_->Run(op::GetTag{"order"}, found.Done());
  ASSERT_TRUE(found.Wait());
  EXPECT_EQ(found.Wait()->step, 10);

  Outcome<state::TagRecord> deleted;
  allocator_->Run(op::DeleteTag{"order"}, deleted.Done());
  ASSERT_TRUE(deleted.Wait());
  Outcome<state::TagRecord> gone;
  allocator_->Run(op::GetTag{"order"}, gone.Done());
  ASSERT_FALSE(gone.Wait());
  EXPECT_EQ(gone.Wait().error().code, Code::kNotFound);
  Outcome<state::TagRecord> twice;
  allocator_->Run(op::DeleteTag{"order"}, twice.Done());
  ASSERT_FALSE(twice.Wait());
  EXPECT_EQ(twice.Wait().error().code, Code::kNotFound);
}

// ---- sequence spaces ----

SpaceUpdate SpaceOf(int64_t section_size, int64_t step) {
  SpaceUpdate u;
  u.section_size = section_size;
  u.step = step;
  return u;
}

TEST_F(LocalAllocatorTest, SectionRaisesAreInTheStoreWhenValuesAreReturned) {
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", SpaceOf(100, 10)}));
  for (uint64_t round = 0; round < 30; ++round) {
    auto v = allocator_->RunNow(op::NextSeq{"chat", {5, 250}});
    ASSERT_TRUE(v) << v.error().message;
    for (size_t i = 0; i < 2; ++i) {
      const uint64_t key = i == 0 ? 5 : 250;
      auto stored = store_->GetSection("chat", key / 100);
      ASSERT_TRUE(stored && stored->has_value());
      EXPECT_GE((*stored)->max_seq, (*v)[i]) << "key " << key << " got a value above its "
                                             << "section's persisted maximum";
    }
  }
}

// R6 standalone: the maximum is raised ahead of need once less than the configured share of a step
// is left, so only a section's first value waits for a synced raise.
TEST_F(LocalAllocatorTest, SectionsAreRaisedAheadOfNeedAtTheConfiguredShareOfAStep) {
  // A space of its own for each share: the store stays across the reopening.
  for (const auto& [share, raised_at, space] :
       {std::tuple{0.5, uint64_t{6}, "half"}, std::tuple{1.0, uint64_t{1}, "whole"}}) {
    SCOPED_TRACE(share);
    LocalAllocatorOptions options;
    options.spaces.raise_ahead = share;
    Open(options);
    ASSERT_TRUE(allocator_->RunNow(op::PutSpace{space, SpaceOf(100, 10)}));
    for (uint64_t want = 1; want <= raised_at; ++want) {
      auto v = allocator_->RunNow(op::NextSeq{space, {5}});
      ASSERT_TRUE(v) << v.error().message;
      ASSERT_EQ((*v)[0], want);
      auto stored = store_->GetSection(space, 0);
      ASSERT_TRUE(stored && stored->has_value());
      // The first value raised to 10 (1 + step - 1); the value that leaves less than the share of
      // a step raises one more step, before it is returned.
      EXPECT_EQ((*stored)->max_seq, want < raised_at ? 10u : 20u) << "value " << want;
    }
  }
}

TEST_F(LocalAllocatorTest, SequencesAfterARestartAreAboveEverythingReturned) {
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", SpaceOf(10, 7)}));
  std::map<uint64_t, uint64_t> highest;
  for (int restart = 0; restart < 4; ++restart) {
    SCOPED_TRACE(restart);
    for (int i = 0; i < 40; ++i) {
      std::vector<uint64_t> keys = {static_cast<uint64_t>(i % 13), 3, 1000000};
      auto v = allocator_->RunNow(op::NextSeq{"chat", keys});
      ASSERT_TRUE(v) << v.error().message;
      for (size_t k = 0; k < keys.size(); ++k) {
        EXPECT_GT((*v)[k], highest[keys[k]]) << "key " << keys[k];
        highest[keys[k]] = (*v)[k];
      }
      auto current = allocator_->RunNow(op::CurrentSeq{"chat", 3});
      ASSERT_TRUE(current);
      EXPECT_EQ(*current, highest[3]);
    }
    Outcome<std::vector<uint64_t>> async;
    allocator_->Run(op::NextSeq{"chat", {3}}, async.Done());
    ASSERT_TRUE(async.Wait());
    EXPECT_GT((*async.Wait())[0], highest[3]);
    highest[3] = (*async.Wait())[0];
    // Key 3 uses its section up to exactly the persisted maximum: the restarted allocator must
    // start above that value, not at it.
    for (int i = 0; i < 8; ++i) {
      auto stored = store_->GetSection("chat", 0);
      ASSERT_TRUE(stored && stored->has_value());
      if (highest[3] == (*stored)->max_seq) break;
      auto v = allocator_->RunNow(op::NextSeq{"chat", {3}});
      ASSERT_TRUE(v);
      highest[3] = (*v)[0];
    }
    // Crash: only the store survives.
    Open();
    auto current = allocator_->RunNow(op::CurrentSeq{"chat", 3});
    ASSERT_TRUE(current);
    EXPECT_GE(*current, highest[3]) << "current never reads below a value handed out";
  }
}

TEST_F(LocalAllocatorTest, DeletedSpaceIsRefusedAndKeepsItsSections) {
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", SpaceOf(100, 10)}));
  auto before = allocator_->RunNow(op::NextSeq{"chat", {1}});
  ASSERT_TRUE(before);
  ASSERT_TRUE(allocator_->RunNow(op::DeleteSpace{"chat"}));
  auto refused = allocator_->RunNow(op::NextSeq{"chat", {1}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kNotFound);
  auto changed = allocator_->RunNow(op::PutSpace{"chat", SpaceOf(50, 10)});
  ASSERT_FALSE(changed);
  EXPECT_EQ(changed.error().code, Code::kFailedPrecondition);
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", {}}));
  auto after = allocator_->RunNow(op::NextSeq{"chat", {1}});
  ASSERT_TRUE(after);
  EXPECT_GT((*after)[0], (*before)[0]);
  auto listed = allocator_->RunNow(op::ListSpaces{});
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 1u);
}

// What `kleaf state export --standalone` reads of a store, through the export file and back.
state::ExportContents ExportedThroughTheFile(state::Store& store) {
  state::ExportContents contents;
  contents.tags = store.ListTags().value();
  contents.spaces = store.ListSpaces().value();
  contents.sections = store.ListSections().value();
  std::istringstream file(state::EncodeExportFile("standalone:test", "now", contents));
  return state::DecodeExportFile(file).value();
}

TEST_F(LocalAllocatorTest, AnImportRestoresSpacesAndRaisesSectionsByTheBumpAboveEveryValue) {
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", SpaceOf(100, 10)}));
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"gone", SpaceOf(50, 5)}));
  std::map<std::pair<std::string, uint64_t>, uint64_t> highest;
  for (int i = 0; i < 300; ++i) {
    const std::vector<uint64_t> keys = {static_cast<uint64_t>(i % 7),
                                        static_cast<uint64_t>(150 + i % 3), 99'999};
    auto v = allocator_->RunNow(op::NextSeq{"chat", keys});
    ASSERT_TRUE(v) << v.error().message;
    for (size_t k = 0; k < keys.size(); ++k) highest[{"chat", keys[k]}] = (*v)[k];
  }
  auto gone = allocator_->RunNow(op::NextSeq{"gone", {3}});
  ASSERT_TRUE(gone);
  highest[{"gone", 3}] = (*gone)[0];
  ASSERT_TRUE(allocator_->RunNow(op::DeleteSpace{"gone"}));
  const state::ExportContents exported = ExportedThroughTheFile(*store_);
  ASSERT_EQ(exported.spaces.size(), 2u);
  ASSERT_EQ(exported.sections.size(), 4u);  // chat 0, 1, 999; gone 0

  // A fresh node: one of its sections is higher already (kept), the others are raised.
  testing::TempDir other;
  auto fresh_store = state::Store::Open(other.Sub("fresh"));
  ASSERT_TRUE(fresh_store) << fresh_store.error().message;
  auto fresh = std::make_unique<LocalAllocator>(**fresh_store, clock_, options_);
  ASSERT_TRUE(fresh->RunNow(op::PutSpace{"chat", SpaceOf(100, 10)}));
  ASSERT_TRUE(fresh->RunNow(op::RaiseSection{"chat", 999, 100, 1'000'000}));
  constexpr int64_t kBump = 1000;
  std::ostringstream errors;
  auto counts = ImportState(*fresh, exported, kBump, errors);
  EXPECT_EQ(errors.str(), "");
  EXPECT_EQ(counts.failed(), 0);
  EXPECT_EQ(counts.sequences.spaces, 2);
  EXPECT_EQ(counts.sequences.sections_raised, 3);
  EXPECT_EQ(counts.sequences.sections_kept, 1);
  for (const auto& r : exported.sections) {
    auto stored = (*fresh_store)->GetSection(r.space, r.section);
    ASSERT_TRUE(stored && stored->has_value()) << r.space << " " << r.section;
    EXPECT_EQ((*stored)->max_seq,
              r.space == "chat" && r.section == 999 ? 1'000'000 : r.max_seq + kBump)
        << r.space << " " << r.section;
  }
  // Every key continues above the exported maximum of its section plus the bump.
  for (const auto& [where, value] : highest) {
    if (where.first == "gone") continue;
    auto next = fresh->RunNow(op::NextSeq{where.first, {where.second}});
    ASSERT_TRUE(next) << next.error().message;
    const uint64_t section = where.second / 100;
    auto it = std::find_if(exported.sections.begin(), exported.sections.end(), [&](const auto& r) {
      return r.space == "chat" && r.section == section;
    });
    ASSERT_NE(it, exported.sections.end());
    EXPECT_GT((*next)[0], it->max_seq + kBump) << "key " << where.second;
    EXPECT_GT((*next)[0], value + kBump) << "key " << where.second;
  }
  // The deleted space is deleted again, with its section_size and its raised section kept.
  auto refused = fresh->RunNow(op::NextSeq{"gone", {3}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kNotFound);
  ASSERT_TRUE(fresh->RunNow(op::PutSpace{"gone", {}}));
  auto again = fresh->RunNow(op::NextSeq{"gone", {3}});
  ASSERT_TRUE(again);
  const uint64_t gone_before = highest[{"gone", 3}];
  EXPECT_GT((*again)[0], gone_before + kBump);

  // Importing the same file again lowers nothing: every section is as high already.
  std::ostringstream errors2;
  auto twice = ImportState(*fresh, exported, kBump, errors2);
  EXPECT_EQ(errors2.str(), "");
  EXPECT_EQ(twice.sequences.sections_raised, 0);
  EXPECT_EQ(twice.sequences.sections_kept, 4);
  fresh->Stop();
}

TEST_F(LocalAllocatorTest, AnImportIntoASpaceOfAnotherSectionSizeFailsNamingItAndTouchesNothing) {
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"chat", SpaceOf(100, 10)}));
  ASSERT_TRUE(allocator_->RunNow(op::NextSeq{"chat", {1}}));
  ASSERT_TRUE(allocator_->RunNow(op::PutSpace{"inbox", SpaceOf(10, 10)}));
  ASSERT_TRUE(allocator_->RunNow(op::NextSeq{"inbox", {1}}));
  const state::ExportContents exported = ExportedThroughTheFile(*store_);
  testing::TempDir other;
  auto fresh_store = state::Store::Open(other.Sub("fresh"));
  ASSERT_TRUE(fresh_store);
  LocalAllocator fresh(**fresh_store, clock_, options_);
  ASSERT_TRUE(fresh.RunNow(op::PutSpace{"chat", SpaceOf(1000, 10)}));
  std::ostringstream errors;
  auto counts = ImportState(fresh, exported, 0, errors);
  EXPECT_EQ(counts.failed(), 1);
  EXPECT_NE(errors.str().find("space chat: section_size: cannot change from 1000 to 100"),
            std::string::npos)
      << errors.str();
  EXPECT_EQ(counts.sequences.spaces, 1) << "inbox is imported";
  EXPECT_EQ(counts.sequences.sections_raised, 1);
  auto untouched = (*fresh_store)->GetSection("chat", 0);
  ASSERT_TRUE(untouched);
  EXPECT_FALSE(untouched->has_value()) << "no section of the refused space is written";
  fresh.Stop();
}

}  // namespace
}  // namespace kleaf::allocator
