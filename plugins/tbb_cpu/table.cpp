// The tbb_cpu entry table: every member of the ABI, the optional ones included.
#include "members.hpp"

#include <ravel/backend.hpp>
#include <ravel/plugin_kit.hpp>

namespace tbbcpu {
namespace {

// Filled from the SDK's one list of members (<ravel/plugin_kit.hpp>): a member added to the ABI
// is a compile error here until the plugin defines it.
constexpr rvl_backend_api kTable = RVL_BACKEND_TABLE_OF_FUNCTIONS();

}  // namespace
}  // namespace tbbcpu

RVL_DEFINE_BACKEND_ENTRY(tbbcpu::kTable)
