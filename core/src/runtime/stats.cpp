#include "runtime/stats.hpp"

#include <mutex>

namespace ravel {

namespace {
std::mutex g_stats_mutex;
KernelStats g_last, g_total;
}  // namespace

KernelStats last_realization_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_last;
}
KernelStats cumulative_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_total;
}
void reset_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_last = g_total = KernelStats{};
}

namespace detail {

void record_realization(const KernelStats& stats) {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_last = stats;
  g_total.realizations += stats.realizations;
  g_total.programs += stats.programs;
  g_total.contractions += stats.contractions;
  g_total.bytes_read += stats.bytes_read;
  g_total.bytes_written += stats.bytes_written;
  g_total.bytes_allocated += stats.bytes_allocated;
  g_total.schedule_seconds += stats.schedule_seconds;
  g_total.execute_seconds += stats.execute_seconds;
  g_total.cache_hits += stats.cache_hits;
  g_total.cache_misses += stats.cache_misses;
  g_total.transfers += stats.transfers;
  g_total.bytes_transferred += stats.bytes_transferred;
}

}  // namespace detail
}  // namespace ravel
