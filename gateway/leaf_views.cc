#include "gateway/leaf_views.h"

#include <nlohmann/json.hpp>

#include "base/clock.h"

namespace kleaf::gateway {

using nlohmann::json;

std::string LeafCacheJson(const std::vector<SegmentBuffer::Snapshot>& buffers) {
  json out = json::object();
  for (const auto& b : buffers) {
    const auto& active = b.active;
    const auto& standby = b.standby;
    out[b.tag] = {{"key", b.tag},
                  {"initOk", active.has_value()},
                  {"nextReady", standby.has_value()},
                  {"pos", 0},
                  {"value0", active ? b.next : 0},
                  {"max0", active ? active->end : 0},
                  {"step0", active ? active->size() : 0},
                  {"value1", standby ? standby->start : 0},
                  {"max1", standby ? standby->end : 0},
                  {"step1", standby ? standby->size() : 0}};
  }
  return out.dump();
}

std::string LeafDbJson(const std::vector<state::TagRecord>& tags) {
  json items = json::array();
  for (const auto& t : tags) {
    items.push_back({{"biz_tag", t.tag},
                     {"max_id", t.max_id},
                     {"step", t.step},
                     {"description", t.description},
                     {"update_time", FormatUtcMs(t.update_time_ms)}});
  }
  // Records hold UTF-8 (the tag admin and the importers check it); never throw over one that
  // does not.
  return json{{"items", items}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kleaf::gateway
