#include "base/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kleaf::metrics {
namespace {

struct ProcStat {
  double cpu_seconds = 0;
  double start_ticks = 0;  // since boot
  double virtual_bytes = 0;
  double resident_pages = 0;
};

// /proc/self/stat: fields after the parenthesised command name (which may hold spaces), numbered
// as in proc(5): 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss.
bool ReadProcStat(ProcStat& out) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (int n = 3; fields >> field; ++n) {
    if (n == 14 || n == 15) out.cpu_seconds += std::stod(field) / ticks;
    if (n == 22) out.start_ticks = std::stod(field);
    if (n == 23) out.virtual_bytes = std::stod(field);
    if (n == 24) {
      out.resident_pages = std::stod(field);
      return true;
    }
  }
  return false;
}

// The boot time (btime of /proc/stat), seconds since the epoch; 0 when unreadable.
double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && (in >> value)) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double OpenFds() {
  std::error_code ec;
  double n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

void RegisterProcessMetrics(Registry& registry) {
  Gauge& cpu = registry.GetSampledCounter("process_cpu_seconds_total",
                                          "Total user and system CPU time spent in seconds.");
  Gauge& resident =
      registry.GetGauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  Gauge& virt = registry.GetGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
  Gauge& open_fds = registry.GetGauge("process_open_fds", "Number of open file descriptors.");
  Gauge& max_fds = registry.GetGauge("process_max_fds", "Maximum number of open file descriptors.");
  Gauge& start = registry.GetGauge("process_start_time_seconds",
                                   "Start time of the process since unix epoch in seconds.");
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double boot = BootTimeSeconds();
  // The registry owns the gauges for its lifetime, as it does the collector.
  auto collect = [cpu = &cpu, resident = &resident, virt = &virt, open_fds = &open_fds,
                  max_fds = &max_fds, start = &start, page_bytes, ticks, boot] {
    ProcStat stat;
    if (ReadProcStat(stat)) {
      cpu->Set(stat.cpu_seconds);
      resident->Set(stat.resident_pages * page_bytes);
      virt->Set(stat.virtual_bytes);
      start->Set(boot + stat.start_ticks / ticks);
    }
    open_fds->Set(OpenFds());
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) max_fds->Set(static_cast<double>(limit.rlim_cur));
  };
  collect();
  registry.AddCollector(collect);
}

}  // namespace kleaf::metrics
