// zecl: SPIR-V -> SPIR 1.2 bitcode, which PoCL 3.1 builds (it has no SPIR-V front end).
//
// In process through the translator's library when the build found it (ZECL_SPIRV_IN_PROCESS):
// starting `llvm-spirv-14` for every module cost ~20 ms of CPU each, nearly all of it the dynamic
// loader mapping and relocating libLLVM-14, which was about a quarter of a Level Zero
// conformance run on PoCL (docs/testing.md). ZECL_LLVM_SPIRV=PATH forces the tool (it names the
// executable; `llvm-spirv-14` is the tool without the library), so both paths stay testable.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "zecl.hpp"

extern char** environ;

namespace zecl {

namespace {

int run_tool(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0) return -1;
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool translate_with_tool(const char* tool, const void* spirv, size_t bytes, std::string& bitcode,
                         std::string& err) {
  char dir[] = "/tmp/zecl-XXXXXX";
  if (!mkdtemp(dir)) return err = "mkdtemp failed", false;
  const std::string spv = std::string(dir) + "/m.spv", bc = std::string(dir) + "/m.bc";
  std::ofstream(spv, std::ios::binary).write(static_cast<const char*>(spirv), std::streamsize(bytes));
  const int rc = run_tool({tool, "-r", spv, "-o", bc});
  std::stringstream ss;
  ss << std::ifstream(bc, std::ios::binary).rdbuf();
  bitcode = ss.str();
  unlink(spv.c_str());
  unlink(bc.c_str());
  rmdir(dir);
  if (rc != 0 || bitcode.empty())
    return err = "llvm-spirv -r rejected the module (exit " + std::to_string(rc) + ")", false;
  return true;
}

}  // namespace

bool translate(const void* spirv, size_t bytes, std::string& bitcode, std::string& err) {
  const char* tool = std::getenv("ZECL_LLVM_SPIRV");
#ifdef ZECL_SPIRV_IN_PROCESS
  if (!tool || !*tool) return translate_in_process(spirv, bytes, bitcode, err);
#endif
  return translate_with_tool(tool && *tool ? tool : "llvm-spirv-14", spirv, bytes, bitcode, err);
}

}  // namespace zecl
