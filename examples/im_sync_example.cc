// Message sync by sequence, as an instant-messaging server does it with a kleaf sequence space
// (docs/architecture.md, I5; README, "Sequences per key"): every mailbox (a user id) is a key;
// storing a message for its recipients takes one next value per recipient in one call (a group
// message fans out), and the message is kept in each recipient's mailbox under that value. A
// device remembers the last value it synced and asks "what is new since N": it compares N with
// the mailbox's current value and reads the messages above N. Values only go up per key, so a
// device never misses a message by syncing too early, even across server failovers.
//
// Usage: im_sync_example GATEWAYS(host:port,...) SPACE [MESSAGES]
// The space must exist (PUT /api/v1/spaces/SPACE). Sends MESSAGES (default 30) direct and group
// messages between four users, syncs each user's device between them, and prints each sync.
// Exit code 0 when every device saw exactly its messages, in the order they were sent; 1 on bad
// arguments; 2 when a call failed; 3 when a device's view is wrong.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "kleaf/http_client.h"

namespace {

using UserId = uint64_t;

// The server's storage: each mailbox's messages by sequence value (a database table keyed by
// (user, seq) in a real server).
struct Mailboxes {
  std::map<UserId, std::map<uint64_t, std::string>> by_user;

  // Messages of `user` above `after`, in sequence order.
  std::vector<std::pair<uint64_t, std::string>> Since(UserId user, uint64_t after) const {
    std::vector<std::pair<uint64_t, std::string>> out;
    auto it = by_user.find(user);
    if (it == by_user.end()) return out;
    for (auto m = it->second.upper_bound(after); m != it->second.end(); ++m) out.push_back(*m);
    return out;
  }
};

// A device: the last value it synced, and what it has shown so far.
struct Device {
  UserId user = 0;
  uint64_t synced = 0;
  std::vector<std::string> shown;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s GATEWAYS SPACE [MESSAGES]\n", argv[0]);
    return 1;
  }
  auto gateways = kleaf::ParseGateways(argv[1]);
  if (!gateways) {
    std::fprintf(stderr, "error: %s\n", gateways.error().message.c_str());
    return 1;
  }
  const std::string space = argv[2];
  const int messages = argc > 3 ? std::atoi(argv[3]) : 30;
  if (messages < 1) {
    std::fprintf(stderr, "MESSAGES must be >= 1\n");
    return 1;
  }
  kleaf::HttpClient::Options options;
  options.gateways = *gateways;
  auto client = kleaf::HttpClient::Create(options);
  if (!client) {
    std::fprintf(stderr, "error: %s\n", client.error().message.c_str());
    return 1;
  }
  kleaf::HttpClient& kleaf = **client;

  const std::vector<UserId> users = {1001, 1002, 1003, 1004};
  std::map<UserId, Device> devices;
  for (UserId u : users) devices[u].user = u;
  Mailboxes server;
  std::map<UserId, std::vector<std::string>> expected;  // what each device must show, in order

  // The device's sync: is there anything above what it has? Then read it.
  auto sync = [&](Device& d) -> bool {
    auto current = kleaf.CurrentSeq(space, d.user);
    if (!current) {
      std::fprintf(stderr, "error: current of %llu: %s\n", static_cast<unsigned long long>(d.user),
                   current.error().message.c_str());
      return false;
    }
    if (*current <= d.synced) return true;  // nothing new
    auto fresh = server.Since(d.user, d.synced);
    for (const auto& [seq, text] : fresh) {
      d.shown.push_back(text);
      d.synced = seq;
    }
    std::printf("user %llu synced %zu message(s), now at seq %llu\n",
                static_cast<unsigned long long>(d.user), fresh.size(),
                static_cast<unsigned long long>(d.synced));
    return true;
  };

  for (int i = 0; i < messages; ++i) {
    // Every third message goes to the whole group, the others to one user.
    std::vector<UserId> to;
    if (i % 3 == 0) {
      to = users;
    } else {
      to = {users[static_cast<size_t>(i) % users.size()]};
    }
    const std::string text = "message " + std::to_string(i);
    // One next value per recipient, in one call: the message's place in each mailbox.
    auto seqs = kleaf.NextSeqs(space, to);
    if (!seqs) {
      std::fprintf(stderr, "error: next values for message %d: %s\n", i,
                   seqs.error().message.c_str());
      return 2;
    }
    for (size_t r = 0; r < to.size(); ++r) {
      server.by_user[to[r]][(*seqs)[r]] = text;
      expected[to[r]].push_back(text);
    }
    // Devices sync now and then, between messages.
    if (i % 4 == 1) {
      for (auto& [u, d] : devices) {
        if (!sync(d)) return 2;
      }
    }
  }
  bool right = true;
  for (auto& [u, d] : devices) {
    if (!sync(d)) return 2;
    if (d.shown != expected[u]) {
      std::fprintf(stderr, "user %llu shows %zu messages, expected %zu in send order\n",
                   static_cast<unsigned long long>(u), d.shown.size(), expected[u].size());
      right = false;
    }
  }
  if (!right) return 3;
  std::printf("every device shows its %d messages' share, in order\n", messages);
  return 0;
}
