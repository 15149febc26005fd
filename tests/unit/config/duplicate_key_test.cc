// A key given twice in the YAML is an error naming the key, not a silent merge.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace kleaf::config {
namespace {

void ExpectDuplicate(const std::string& yaml, const std::string& key) {
  SCOPED_TRACE(yaml);
  auto r = ParseConfig(yaml);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_EQ(r.error().message, key + ": duplicate key");
}

TEST(ConfigDuplicateKeyTest, RepeatedSectionIsAnError) {
  ExpectDuplicate("http:\n  threads: 2\nstate:\n  path: /a\nhttp:\n  max_batch: 5\n", "http");
  ExpectDuplicate("node:\nnode:\n", "node");
}

TEST(ConfigDuplicateKeyTest, RepeatedKeyInASectionIsAnError) {
  ExpectDuplicate("state:\n  path: /a\n  path: /b\n", "state.path");
  ExpectDuplicate("http: {threads: 2, threads: 3}\n", "http.threads");
}

TEST(ConfigDuplicateKeyTest, RepeatedKeyInAProducerStreamIsAnError) {
  ExpectDuplicate("producer:\n  streams:\n    - {tag: a, mode: segment, tag: b}\n",
                  "producer.streams[0].tag");
}

TEST(ConfigDuplicateKeyTest, SectionsWithoutRepeatsParse) {
  auto r = ParseConfig("segment:\n  auto_create: true\nhttp:\n  threads: 3\n");
  ASSERT_TRUE(r.has_value()) << r.error().message;
}

}  // namespace
}  // namespace kleaf::config
