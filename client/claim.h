// Which fetched records one claim (one offset commit) of BatchConsumer may take (internal, not
// installed). Pure rules, so that tests can hold them to the invariant (I4) without a broker.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kleaf::client {

// How many records at the front of `held` one commit may claim: the ones of the first record's
// partition right behind it, in increasing offsets, at most `room`. A record that goes back (a
// stale re-fetch) ends the run: committing past it would move the group's offset back and hand
// its batch out again. `Records` is a sequence of records with topic, partition and offset.
template <typename Records>
size_t ClaimableRun(const Records& held, size_t room) {
  if (held.empty() || room == 0) return 0;
  const auto& first = held.front();
  size_t run = 1;
  while (run < held.size() && run < room && held[run].partition == first.partition &&
         held[run].topic == first.topic && held[run].offset > held[run - 1].offset) {
    ++run;
  }
  return run;
}

}  // namespace kleaf::client
