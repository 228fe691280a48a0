#include "spirv_check.hpp"

#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/linker.hpp>

#include <cstring>
#include <stdexcept>

namespace l0test {

std::string validate_opencl(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_OPENCL_1_2);
  std::string message;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos,
                               const char* m) {
    message += "word " + std::to_string(pos.index) + ": " + m + "\n";
  });
  if (tools.Validate(words)) return "";
  return message.empty() ? "invalid (no message)" : message;
}

namespace {
// Rewrites the literal string of every OpEntryPoint and OpName equal to `from` to `to`; the
// new name must fit in the same number of words.
void rename(std::vector<uint32_t>& w, const std::string& from, const std::string& to) {
  const size_t words = (from.size() + 4) / 4;
  if ((to.size() + 4) / 4 != words) throw std::runtime_error("rename: name length differs");
  for (size_t i = 5; i < w.size();) {
    const uint32_t op = w[i] & 0xffff, wc = w[i] >> 16;
    if (wc == 0) break;
    const size_t at = op == 15 ? i + 3 : op == 5 ? i + 2 : 0;  // OpEntryPoint, OpName
    if (at && at + words <= i + wc &&
        std::strncmp(reinterpret_cast<const char*>(&w[at]), from.c_str(), words * 4) == 0) {
      std::vector<char> buf(words * 4, 0);
      std::memcpy(buf.data(), to.c_str(), to.size());
      std::memcpy(&w[at], buf.data(), words * 4);
    }
    i += wc;
  }
}
}  // namespace

std::vector<uint32_t> link_kernels(std::vector<std::vector<uint32_t>> modules,
                                   const std::vector<std::string>& names) {
  for (size_t i = 0; i < modules.size(); ++i) rename(modules[i], "rvl_kernel", names[i]);
  spvtools::Context ctx(SPV_ENV_OPENCL_1_2);
  std::string message;
  ctx.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t&,
                             const char* m) { message += std::string(m) + "\n"; });
  std::vector<uint32_t> out;
  spvtools::LinkerOptions opts;
  opts.SetCreateLibrary(true);  // kernels only, no linkage imports to resolve
  if (spvtools::Link(ctx, modules, &out, opts) != SPV_SUCCESS)
    throw std::runtime_error("spirv-link failed: " + message);
  return out;
}

}  // namespace l0test
