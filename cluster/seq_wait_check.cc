#include "cluster/seq_wait_check.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace kleaf::cluster {

std::string MembersThatDoNotWait(const std::vector<kafka::GroupMember>& members) {
  std::string out;
  for (const auto& m : members) {
    if (m.client_id.ends_with(kSeqWaitMark)) continue;
    if (!out.empty()) out += ", ";
    out += "\"" + m.client_id + "\" (" + (m.host.empty() ? "?" : m.host) + ")";
  }
  return out;
}

SeqWaitCheck::SeqWaitCheck(Describe describe, std::chrono::milliseconds period,
                           std::chrono::milliseconds retry)
    : describe_(std::move(describe)), period_(period), retry_(retry) {
  auto& registry = metrics::Registry::Default();
  const std::string blocked_help = kLeaseBlockedHelp;
  blocked_old_ =
      &registry.GetGauge("kleaf_sequence_lease_blocked", blocked_help, {{"reason", "old_member"}});
  blocked_unchecked_ = &registry.GetGauge("kleaf_sequence_lease_blocked", blocked_help,
                                          {{"reason", "group_unchecked"}});
  const std::string checks_help =
      "Descriptions of the allocators' group for the sequence lease's group check, by outcome.";
  ok_ = &registry.GetCounter("kleaf_sequence_group_checks_total", checks_help, {{"outcome", "ok"}});
  failed_ = &registry.GetCounter("kleaf_sequence_group_checks_total", checks_help,
                                 {{"outcome", "failed"}});
  {
    MutexLock lock(mu_);
    Publish();
  }
  thread_ = std::thread([this] { Run(); });
}

SeqWaitCheck::~SeqWaitCheck() { Stop(); }

void SeqWaitCheck::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  blocked_old_->Set(0);
  blocked_unchecked_->Set(0);
}

void SeqWaitCheck::Changed() {
  {
    MutexLock lock(mu_);
    joined_ = true;
    ++changes_;
    Publish();
  }
  wake_.NotifyAll();
}

SeqWaitCheck::Verdict SeqWaitCheck::Now() const {
  MutexLock lock(mu_);
  if (checked_ != changes_) return Verdict::kUnchecked;
  return !old_members_.empty() ? Verdict::kOldMember : Verdict::kAllWait;
}

std::optional<std::string> SeqWaitCheck::Blocked() const {
  MutexLock lock(mu_);
  if (checked_ == changes_ && old_members_.empty()) return std::nullopt;
  return WhyLocked();
}

std::string SeqWaitCheck::Why() const {
  MutexLock lock(mu_);
  return WhyLocked();
}

std::string SeqWaitCheck::WhyLocked() const {
  if (checked_ != changes_) {
    return "the allocators' group has not been described since its membership last changed" +
           (failure_.empty() ? std::string() : " (" + failure_ + ")");
  }
  return old_members_.empty()
             ? "every member of the allocators' group waits out leases"
             : "members of the allocators' group do not wait out leases: " + old_members_;
}

int64_t SeqWaitCheck::Descriptions() const {
  MutexLock lock(mu_);
  return descriptions_;
}

void SeqWaitCheck::Publish() {
  const bool unchecked = checked_ != changes_;
  blocked_unchecked_->Set(unchecked ? 1 : 0);
  blocked_old_->Set(!unchecked && !old_members_.empty() ? 1 : 0);
  all_wait_.store(!unchecked && old_members_.empty(), std::memory_order_release);
}

void SeqWaitCheck::Run() {
  bool last_failed = false;
  std::chrono::milliseconds retry = retry_;
  while (true) {
    uint64_t begun = 0;
    {
      MutexLock lock(mu_);
      // Nothing to describe before this node is a member (its first assignment or revocation).
      wake_.Wait(lock, [this]() KLEAF_REQUIRES(mu_) { return stop_ || joined_; });
      // Described already for the newest change: wait for the next one, or the period. After a
      // failure: at once when a change came while it ran, after `retry_` while a change waits for
      // its description (leases wait for it), else after the backed-off retry.
      const bool changed_since = changes_ != begun_last_;
      if (checked_ == changes_ && !last_failed) {
        wake_.WaitFor(lock, period_, [this, seen = changes_]() KLEAF_REQUIRES(mu_) {
          return stop_ || changes_ != seen;
        });
      } else if (last_failed && !changed_since) {
        wake_.WaitFor(lock, checked_ != changes_ ? retry_ : retry,
                      [this, seen = changes_]()
                          KLEAF_REQUIRES(mu_) { return stop_ || changes_ != seen; });
      }
      if (stop_) return;
      begun = changes_;
      begun_last_ = begun;
    }
    auto members = describe_();
    // This node describes its group as a member of it: an answer without members is not the group.
    if (members && members->empty()) {
      members = Fail(Code::kUnavailable,
                     "the allocators' group was described without any member (not joined yet)");
    }
    MutexLock lock(mu_);
    ++descriptions_;
    last_failed = !members;
    if (!members) {
      failed_->Inc();
      retry = last_failed && failure_.empty() ? retry_ : std::min(retry * 2, period_);
      // Only an answer says what the group is now; until one, the last verdict stands when
      // nothing changed since it.
      if (members.error().message != failure_) {
        spdlog::warn("[allocator] sequence leases: the group check failed: {}",
                     members.error().message);
      }
      failure_ = members.error().message;
      Publish();
      continue;
    }
    ok_->Inc();
    retry = retry_;
    if (!failure_.empty())
      spdlog::info("[allocator] sequence leases: the group check answers again");
    failure_.clear();
    const std::string old = MembersThatDoNotWait(*members);
    if (!old.empty() && old != old_members_) {
      spdlog::warn(
          "[allocator] sequence leases: none is held while the allocators' group has members "
          "that do not wait out leases (an older version, without ;seqwait=1 in its client id): "
          "{}; sequences are served with a commit per batch until they leave",
          old);
    } else if (old.empty() && !old_members_.empty()) {
      spdlog::info(
          "[allocator] sequence leases: every member of the allocators' group waits "
          "out leases again");
    }
    old_members_ = old;
    checked_ = begun;
    Publish();
  }
}

}  // namespace kleaf::cluster
