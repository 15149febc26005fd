// In-process throughput of the two ID paths (docs/architecture.md, "Targets": segment draws of
// one tag scale with threads, snowflake at the 4.096 M IDs/s cap of one worker). Run:
// build/kleaf_bench; see docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <atomic>

#include "base/clock.h"
#include "gateway/segment_buffer.h"
#include "snowflake/snowflake.h"

namespace kleaf::gateway {
namespace {

// Hands out consecutive ranges inline, as fast as asked: the benchmark measures the buffer.
SegmentBuffer::FetchFn InlineSource() {
  auto next = std::make_shared<std::atomic<int64_t>>(1);
  return [next](int64_t step, allocator::Callback<allocator::Segment> done) {
    int64_t size = step == 0 ? 1000000 : step;
    int64_t start = next->fetch_add(size);
    done(allocator::Segment{"bench", start, start + size, 1000000});
  };
}

// One buffer shared by the benchmark's threads, made by thread 0 before the timed loop (whose
// start is a barrier for all threads).
std::shared_ptr<SegmentBuffer>& SharedBuffer(const benchmark::State& state) {
  static std::shared_ptr<SegmentBuffer> buffer;
  if (state.thread_index() == 0) {
    buffer = SegmentBuffer::Create("bench", InlineSource(), SystemClock::Instance(),
                                   {.max_step = 1000000, .preload_percent = 10});
  }
  return buffer;
}

// TryNext: IDs increase in draw order across threads; every draw is a fetch_add on one line.
void BM_SegmentNext(benchmark::State& state) {
  auto& buffer = SharedBuffer(state);
  int64_t sum = 0;
  for (auto _ : state) {
    auto id = buffer->TryNext();
    sum += *id;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SegmentNext)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

// TryNextChunked: each thread draws from its own chunk of the segment (IDs increase per thread).
void BM_SegmentNextChunked(benchmark::State& state) {
  auto& buffer = SharedBuffer(state);
  int64_t sum = 0;
  for (auto _ : state) {
    auto id = buffer->TryNextChunked();
    sum += *id;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SegmentNextChunked)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

// TryTake(1000) and writing the 1,000 IDs into a vector, the threads on one buffer.
void BM_SegmentBatch1000(benchmark::State& state) {
  auto& buffer = SharedBuffer(state);
  std::vector<IdRange> out;
  std::vector<int64_t> ids;
  ids.reserve(1000);
  for (auto _ : state) {
    out.clear();
    ids.clear();
    buffer->TryTake(1000, out);
    for (auto r : out) {
      for (int64_t id = r.start; id < r.end; ++id) ids.push_back(id);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_SegmentBatch1000)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_SnowflakeNext(benchmark::State& state) {
  static snowflake::SnowflakeGenerator* generator = nullptr;
  if (state.thread_index() == 0) {
    delete generator;
    generator = new snowflake::SnowflakeGenerator(snowflake::SnowflakeLayout::Default(),
                                                  {.worker_id = 1, .random_sequence_start = false},
                                                  SystemClock::Instance());
  }
  int64_t sum = 0;
  for (auto _ : state) {
    auto id = generator->Next();
    sum += *id;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SnowflakeNext)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace kleaf::gateway

BENCHMARK_MAIN();
