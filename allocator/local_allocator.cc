#include "allocator/local_allocator.h"

#include "base/tag.h"

namespace kleaf::allocator {

LocalAllocator::LocalAllocator(state::Store& store, Clock& clock, LocalAllocatorOptions options)
    : store_(store), clock_(clock), options_(options), pool_(options.threads, "kleaf-alloc") {}

LocalAllocator::~LocalAllocator() { pool_.Stop(); }

Result<Segment> LocalAllocator::AllocateSegmentNow(const std::string& tag, int64_t step) {
  if (auto v = ValidateTag(tag); !v) return std::unexpected(v.error());
  std::lock_guard lock(mu_);
  auto existing = store_.GetTag(tag);
  if (!existing) return std::unexpected(existing.error());
  state::TagRecord record;
  if (*existing && !(*existing)->deleted) {
    record = **existing;
  } else if (options_.auto_create) {
    auto created = ApplyTagUpdate(*existing, tag, TagUpdate{}, options_.default_step,
                                  options_.max_step, clock_.NowMs());
    if (!created) return std::unexpected(created.error());
    record = *created;
  } else {
    return Fail(Code::kNotFound, "unknown tag '" + tag + "'");
  }
  auto segment = ReserveSegment(record, step, options_.max_step, clock_.NowMs());
  if (!segment) return segment;
  if (auto put = store_.PutTag(record); !put) return std::unexpected(put.error());
  return segment;
}

Result<state::TagRecord> LocalAllocator::PutTagNow(const std::string& tag, const TagUpdate& update) {
  if (auto v = ValidateTag(tag); !v) return std::unexpected(v.error());
  std::lock_guard lock(mu_);
  auto existing = store_.GetTag(tag);
  if (!existing) return std::unexpected(existing.error());
  auto record = ApplyTagUpdate(*existing, tag, update, options_.default_step, options_.max_step,
                               clock_.NowMs());
  if (!record) return record;
  if (auto put = store_.PutTag(*record); !put) return std::unexpected(put.error());
  return record;
}

void LocalAllocator::AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) {
  pool_.Post([this, tag = std::move(tag), step, done = std::move(done)] {
    done(AllocateSegmentNow(tag, step));
  });
}

void LocalAllocator::ListTags(Callback<std::vector<state::TagRecord>> done) {
  pool_.Post([this, done = std::move(done)] {
    auto all = store_.ListTags();
    if (!all) return done(std::unexpected(all.error()));
    std::vector<state::TagRecord> live;
    for (auto& r : *all) {
      if (!r.deleted) live.push_back(std::move(r));
    }
    done(std::move(live));
  });
}

void LocalAllocator::GetTag(std::string tag, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), done = std::move(done)]() {
    if (auto v = ValidateTag(tag); !v) return done(std::unexpected(v.error()));
    auto r = store_.GetTag(tag);
    if (!r) return done(std::unexpected(r.error()));
    if (!*r || (*r)->deleted) return done(Fail(Code::kNotFound, "unknown tag '" + tag + "'"));
    done(**r);
  });
}

void LocalAllocator::PutTag(std::string tag, TagUpdate update, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), update = std::move(update), done = std::move(done)] {
    done(PutTagNow(tag, update));
  });
}

void LocalAllocator::DeleteTag(std::string tag, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), done = std::move(done)]() {
    if (auto v = ValidateTag(tag); !v) return done(std::unexpected(v.error()));
    std::lock_guard lock(mu_);
    auto r = store_.GetTag(tag);
    if (!r) return done(std::unexpected(r.error()));
    if (!*r || (*r)->deleted) return done(Fail(Code::kNotFound, "unknown tag '" + tag + "'"));
    state::TagRecord record = **r;
    state::TagRecord before = record;
    record.deleted = true;
    record.update_time_ms = clock_.NowMs();
    if (auto put = store_.PutTag(record); !put) return done(std::unexpected(put.error()));
    done(before);
  });
}

}  // namespace kleaf::allocator
