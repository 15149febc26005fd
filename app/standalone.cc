#include "app/standalone.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "allocator/local_allocator.h"
#include "app/common.h"
#include "app/serve.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace kleaf::app {
namespace {

allocator::LocalAllocatorOptions LocalOptions(const config::Config& c) {
  allocator::LocalAllocatorOptions o{
      c.segment.max_step,
      c.segment.default_step,
      c.segment.auto_create,
      c.segment.fetch_threads,
      {(int64_t{1} << c.snowflake.worker_bits) - 1, c.workers.lease_ttl_ms,
       c.workers.max_clock_skew_ms},
      state::ParseIdMode(c.segment.default_id_mode).value_or(state::IdMode::kPlain)};
  o.spaces.raise_ahead = static_cast<double>(c.sequence.raise_ahead_percent) / 100;
  return o;
}

}  // namespace

Result<void> BackUpStore(state::Store& store, const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty() || !fs::path(dir).is_absolute()) {
    return Fail(Code::kInvalidArgument,
                "backup: '" + dir + "' is not an absolute path (a directory on the node's host)");
  }
  // One at a time: RocksDB builds a checkpoint in "<dir>.tmp" and renames it.
  static Mutex mu;
  MutexLock lock(mu);
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status) || !fs::is_empty(dir, ec) || ec) {
      return Fail(Code::kFailedPrecondition,
                  "backup: '" + dir +
                      "' exists and is not an empty directory: nothing written (give a new or "
                      "empty directory)");
    }
    // RocksDB creates the directory itself.
    if (!fs::remove(dir, ec) || ec) {
      return Fail(Code::kInternal,
                  "backup: cannot replace the empty directory '" + dir + "': " + ec.message());
    }
  }
  auto made = store.Checkpoint(dir);
  if (!made) return Fail(Code::kInternal, "backup: " + made.error().message);
  spdlog::info("[standalone] state backed up into {}", dir);
  return {};
}

int RunStandalone(const config::Config& c) {
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  allocator::LocalAllocator allocator(**store, SystemClock::Instance(), LocalOptions(c));
  state::Store& s = **store;
  int code = ServeIds(c, s, allocator, "standalone", /*use_registry=*/false, {},
                      [&s](const std::string& dir) { return BackUpStore(s, dir); });
  allocator.Stop();
  return code;
}

Result<allocator::StateImportCounts> ImportIntoStandalone(const config::Config& c,
                                                          const state::ExportContents& contents,
                                                          int64_t bump, std::ostream& errors) {
  auto store = OpenStore(c);
  if (!store) {
    return Fail(store.error().code,
                "state import --standalone: " + store.error().message +
                    " (a running standalone: stop it, import, then start it again)");
  }
  allocator::LocalAllocator allocator(**store, SystemClock::Instance(), LocalOptions(c));
  auto counts = allocator::ImportState(allocator, contents, bump, errors);
  allocator.Stop();
  return counts;
}

Result<state::ExportContents> ExportStandalone(const config::Config& c) {
  auto store = OpenStore(c);
  if (!store) {
    return Fail(store.error().code,
                "state export --standalone: " + store.error().message +
                    " (a running standalone: `kleaf state backup DIR`, then export DIR with "
                    "KLEAF_STATE__PATH=DIR)");
  }
  state::ExportContents contents;
  auto tags = (*store)->ListTags();
  if (!tags) return std::unexpected(tags.error());
  auto spaces = (*store)->ListSpaces();
  if (!spaces) return std::unexpected(spaces.error());
  auto sections = (*store)->ListSections();
  if (!sections) return std::unexpected(sections.error());
  contents.tags = std::move(*tags);
  contents.spaces = std::move(*spaces);
  contents.sections = std::move(*sections);
  return contents;
}

}  // namespace kleaf::app
