// In-process throughput of the two ID paths (docs/architecture.md, "Targets": segment draws of
// one tag scale with threads, snowflake at the 4.096 M IDs/s cap of one worker). Run:
// build/kleaf_bench; see docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <map>
#include <random>
#include <vector>

#include "allocator/sequences.h"
#include "base/clock.h"
#include "gateway/segment_buffer.h"
#include "gateway/seq_json.h"
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

// --- Sequences (issue 28): one fan-out of 1,000 random keys of [0, 1,000,000), as a standalone
// node serves POST /api/v1/seq/{space}: the body read, the counters' plan (Begin, Next, the raises
// kept in a map standing for the store, Commit), the answer written. Each part alone too, and the
// body read by the general JSON reader as the reference of the same run.

std::vector<uint64_t> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key(0, 999'999);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = key(rng);
  return keys;
}

std::string KeysBody(const std::vector<uint64_t>& keys) {
  std::string body = "{\"keys\":[";
  for (size_t i = 0; i < keys.size(); ++i) {
    body += (i == 0 ? "\"" : ",\"") + std::to_string(keys[i]) + "\"";
  }
  return body + "]}";
}

// 64 different fan-outs, cycled through.
const std::vector<std::vector<uint64_t>>& FanOuts() {
  static const auto* fan_outs = [] {
    auto* f = new std::vector<std::vector<uint64_t>>;
    for (uint64_t i = 0; i < 64; ++i) f->push_back(RandomKeys(allocator::kMaxSeqKeys, i));
    return f;
  }();
  return *fan_outs;
}

struct SeqOwner {
  allocator::SequenceCounters counters;
  state::SpaceRecord space = [] {
    state::SpaceRecord r;  // the defaults: sections of 100,000 keys, step 10,000
    r.space = "bench";
    return r;
  }();
  std::map<uint64_t, uint64_t> maxima;  // section -> max_seq, the store's part

  // Writes the raises the counters want (the store's part) and settles them as committed.
  void WriteRaises() {
    const auto raises = counters.TakeRaises();
    for (const auto& raise : raises) maxima[raise.section] = raise.max_seq;
    counters.Settle(raises, /*committed=*/true);
  }

  std::vector<uint64_t> Serve(const std::vector<uint64_t>& keys) {
    const auto load = [this](uint64_t section) -> Result<std::optional<state::SectionRecord>> {
      auto it = maxima.find(section);
      if (it == maxima.end()) return std::nullopt;
      return state::SectionRecord{"bench", section, space.section_size, it->second};
    };
    auto next = counters.Next(space, keys, load);
    if (next->needs_raise) {
      WriteRaises();
      next = counters.Next(space, keys, load);
    }
    WriteRaises();  // ahead of need
    return std::move(next->values);
  }
};

void BM_SeqCountersFanOut1000(benchmark::State& state) {
  SeqOwner owner;
  for (int i = 0; i < 1000; ++i) owner.Serve(FanOuts()[i % 64]);  // every key active
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(owner.Serve(FanOuts()[i++ % 64]));
  state.SetItemsProcessed(state.iterations() * allocator::kMaxSeqKeys);
}
BENCHMARK(BM_SeqCountersFanOut1000);

void BM_SeqKeysRead1000(benchmark::State& state) {
  const std::string body = KeysBody(FanOuts()[0]);
  for (auto _ : state) benchmark::DoNotOptimize(ParseSeqKeys(body));
  state.SetItemsProcessed(state.iterations() * allocator::kMaxSeqKeys);
}
BENCHMARK(BM_SeqKeysRead1000);

// The reference: the general JSON reader that read every fan-out before the hand-written one.
void BM_SeqKeysReadGeneral1000(benchmark::State& state) {
  const std::string body = KeysBody(FanOuts()[0]);
  for (auto _ : state) benchmark::DoNotOptimize(detail::ParseAnySeqKeys(body));
  state.SetItemsProcessed(state.iterations() * allocator::kMaxSeqKeys);
}
BENCHMARK(BM_SeqKeysReadGeneral1000);

void BM_SeqListWrite1000(benchmark::State& state) {
  const auto& keys = FanOuts()[0];
  const std::vector<uint64_t> values(keys.size(), 123'456'789);
  for (auto _ : state) {
    std::string out;
    AppendSeqList(out, "bench", keys, values);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * allocator::kMaxSeqKeys);
}
BENCHMARK(BM_SeqListWrite1000);

void BM_SeqFanOut1000(benchmark::State& state) {
  SeqOwner owner;
  std::vector<std::string> bodies;
  for (const auto& keys : FanOuts()) bodies.push_back(KeysBody(keys));
  for (int i = 0; i < 1000; ++i) owner.Serve(FanOuts()[i % 64]);
  size_t i = 0;
  for (auto _ : state) {
    auto keys = ParseSeqKeys(bodies[i++ % 64]);
    auto values = owner.Serve(*keys);
    std::string out;
    AppendSeqList(out, "bench", *keys, values);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * allocator::kMaxSeqKeys);
}
BENCHMARK(BM_SeqFanOut1000);

}  // namespace
}  // namespace kleaf::gateway

BENCHMARK_MAIN();
