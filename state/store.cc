#include "state/store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

namespace kleaf::state {
namespace {

constexpr std::string_view kTagPrefix = "seg/";
constexpr std::string_view kValuePrefix = "val/";
constexpr std::string_view kTextPrefix = "txt/";
constexpr std::string_view kRestPrefix = "rest/";

Error ToError(const rocksdb::Status& s, std::string_view what) {
  return Error{Code::kInternal, std::string(what) + ": " + s.ToString()};
}

}  // namespace

std::string RocksDbVersion() { return rocksdb::GetRocksVersionAsString(/*with_patch=*/true); }

struct Store::Impl {
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions sync_write;
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.keep_log_file_num = 4;
  options.max_log_file_size = 8 << 20;
  // The state is small (a record per tag, worker id and space section): a 4 MiB memtable, not
  // 64. RocksDB preallocates each write-ahead log at 1.1 x the memtable, so a fresh state.path
  // with a few tags took 75 MB on disk.
  options.write_buffer_size = 4 << 20;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) {
    std::string msg = "cannot open state store at '" + path + "': " + s.ToString();
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      msg += " (is another kleaf process using this state.path?)";
    }
    return Fail(Code::kFailedPrecondition, msg);
  }
  auto impl = std::make_unique<Impl>();
  impl->db.reset(raw);
  impl->sync_write.sync = true;
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Result<std::optional<TagRecord>> Store::GetTag(std::string_view tag) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), TagKey(tag), &value);
  if (s.IsNotFound()) return std::optional<TagRecord>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading tag"));
  auto r = DecodeTag(value);
  if (!r) return std::unexpected(r.error());
  return std::optional<TagRecord>(std::move(*r));
}

Result<void> Store::PutTag(const TagRecord& record) {
  auto s = impl_->db->Put(impl_->sync_write, TagKey(record.tag), EncodeTag(record));
  if (!s.ok()) return std::unexpected(ToError(s, "writing tag"));
  return {};
}

Result<std::vector<TagRecord>> Store::ListTags() {
  std::vector<TagRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(rocksdb::Slice(kTagPrefix.data(), kTagPrefix.size()));
       it->Valid() && it->key().starts_with(rocksdb::Slice(kTagPrefix.data(), kTagPrefix.size()));
       it->Next()) {
    auto r = DecodeTag(it->value().ToStringView());
    if (!r) return std::unexpected(r.error());
    out.push_back(std::move(*r));
  }
  if (!it->status().ok()) return std::unexpected(ToError(it->status(), "listing tags"));
  return out;
}

Result<std::optional<WorkerRecord>> Store::GetWorker(int64_t worker_id) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), WorkerKey(worker_id), &value);
  if (s.IsNotFound()) return std::optional<WorkerRecord>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading worker"));
  auto r = DecodeWorker(value);
  if (!r) return std::unexpected(r.error());
  return std::optional<WorkerRecord>(std::move(*r));
}

Result<std::vector<WorkerRecord>> Store::ListWorkers() {
  std::vector<WorkerRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  const rocksdb::Slice prefix("wrk/");
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto r = DecodeWorker(it->value().ToStringView());
    if (!r) return std::unexpected(r.error());
    out.push_back(std::move(*r));
  }
  if (!it->status().ok()) return std::unexpected(ToError(it->status(), "listing workers"));
  return out;
}

Result<std::optional<SpaceRecord>> Store::GetSpace(std::string_view space) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), SpaceKey(space), &value);
  if (s.IsNotFound()) return std::optional<SpaceRecord>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading space"));
  auto r = DecodeSpace(value);
  if (!r) return std::unexpected(r.error());
  return std::optional<SpaceRecord>(std::move(*r));
}

Result<std::vector<SpaceRecord>> Store::ListSpaces() {
  std::vector<SpaceRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  const rocksdb::Slice prefix("spc/");
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto r = DecodeSpace(it->value().ToStringView());
    if (!r) return std::unexpected(r.error());
    out.push_back(std::move(*r));
  }
  if (!it->status().ok()) return std::unexpected(ToError(it->status(), "listing spaces"));
  return out;
}

Result<std::optional<SectionRecord>> Store::GetSection(std::string_view space, uint64_t section) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), SectionKey(space, section), &value);
  if (s.IsNotFound()) return std::optional<SectionRecord>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading section"));
  auto r = DecodeSection(value);
  if (!r) return std::unexpected(r.error());
  return std::optional<SectionRecord>(std::move(*r));
}

Result<std::vector<SectionRecord>> Store::ListSections() {
  std::vector<SectionRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  const rocksdb::Slice prefix("sec/");
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto r = DecodeSection(it->value().ToStringView());
    if (!r) return std::unexpected(r.error());
    out.push_back(std::move(*r));
  }
  if (!it->status().ok()) return std::unexpected(ToError(it->status(), "listing sections"));
  std::sort(out.begin(), out.end(), [](const SectionRecord& a, const SectionRecord& b) {
    return std::tie(a.space, a.section) < std::tie(b.space, b.section);
  });
  return out;
}

Result<void> Store::Checkpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  if (auto s = rocksdb::Checkpoint::Create(impl_->db.get(), &raw); !s.ok()) {
    return std::unexpected(ToError(s, "checkpoint"));
  }
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Flushes the memtable first (log_size_for_flush 0), so the copy needs no write-ahead log.
  if (auto s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0); !s.ok()) {
    return std::unexpected(ToError(s, "checkpoint into '" + dir + "'"));
  }
  return {};
}

Result<void> Store::Write(const Batch& b, bool sync) {
  rocksdb::WriteBatch batch;
  (void)ForEachRecord(b, [&batch](const auto& r) -> Result<void> {
    batch.Put(KeyOf(r), Encode(r));
    return {};
  });
  for (const auto& [name, value] : b.values) {
    batch.Put(std::string(kValuePrefix) + name, std::to_string(value));
  }
  for (const auto& [name, text] : b.texts) batch.Put(std::string(kTextPrefix) + name, text);
  rocksdb::WriteOptions options;
  options.sync = sync;
  auto s = impl_->db->Write(options, &batch);
  if (!s.ok()) return std::unexpected(ToError(s, "writing batch"));
  return {};
}

Result<void> Store::PutSegmentRests(const std::vector<SegmentRest>& rests) {
  rocksdb::WriteBatch batch;
  for (const auto& r : rests) {
    // One key per range: <scope>/<tag>/<start> cannot collide between two ranges of one tag.
    std::string key = std::string(kRestPrefix) + r.scope + "\x1f" + r.tag + "\x1f" + std::to_string(r.start);
    nlohmann::json j = {{"scope", r.scope}, {"tag", r.tag}, {"start", r.start}, {"end", r.end}};
    batch.Put(key, j.dump());
  }
  auto s = impl_->db->Write(impl_->sync_write, &batch);
  if (!s.ok()) return std::unexpected(ToError(s, "writing segment rests"));
  return {};
}

Result<std::vector<Store::SegmentRest>> Store::TakeSegmentRests() {
  std::vector<SegmentRest> out;
  rocksdb::WriteBatch deletes;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  const rocksdb::Slice prefix(kRestPrefix.data(), kRestPrefix.size());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    deletes.Delete(it->key());
    try {
      auto j = nlohmann::json::parse(it->value().ToStringView());
      out.push_back({j.at("scope").get<std::string>(), j.at("tag").get<std::string>(),
                     j.at("start").get<int64_t>(), j.at("end").get<int64_t>()});
    } catch (const std::exception&) {
      // A record we cannot read is dropped with the others: its IDs become a gap.
    }
  }
  if (!it->status().ok()) return std::unexpected(ToError(it->status(), "listing segment rests"));
  auto s = impl_->db->Write(impl_->sync_write, &deletes);
  if (!s.ok()) return std::unexpected(ToError(s, "deleting segment rests"));
  return out;
}

Result<std::optional<int64_t>> Store::GetValue(std::string_view name) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), std::string(kValuePrefix) + std::string(name), &value);
  if (s.IsNotFound()) return std::optional<int64_t>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading value"));
  try {
    return std::optional<int64_t>(std::stoll(value));
  } catch (const std::exception&) {
    return Fail(Code::kInternal, "corrupt value '" + std::string(name) + "'");
  }
}

Result<void> Store::PutValue(std::string_view name, int64_t value) {
  auto s = impl_->db->Put(impl_->sync_write, std::string(kValuePrefix) + std::string(name),
                          std::to_string(value));
  if (!s.ok()) return std::unexpected(ToError(s, "writing value"));
  return {};
}

Result<std::optional<std::string>> Store::GetText(std::string_view name) {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), std::string(kTextPrefix) + std::string(name), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return std::unexpected(ToError(s, "reading text"));
  return std::optional<std::string>(std::move(value));
}

Result<void> Store::PutText(std::string_view name, std::string_view text) {
  auto s = impl_->db->Put(impl_->sync_write, std::string(kTextPrefix) + std::string(name),
                          rocksdb::Slice(text.data(), text.size()));
  if (!s.ok()) return std::unexpected(ToError(s, "writing text"));
  return {};
}

}  // namespace kleaf::state
