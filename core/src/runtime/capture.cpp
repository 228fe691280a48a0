#include "runtime/capture.hpp"

namespace ravel::detail {

namespace {
thread_local KernelRecorder* t_recorder = nullptr;
}  // namespace

KernelRecorder* active_recorder() { return t_recorder; }

RecordingScope::RecordingScope(KernelRecorder* recorder) : previous_(t_recorder) { t_recorder = recorder; }

RecordingScope::~RecordingScope() { t_recorder = previous_; }

}  // namespace ravel::detail
