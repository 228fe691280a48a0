// zecl: SPIR-V -> SPIR 1.2 bitcode in process, through the SPIR-V/LLVM translator's library
// (Debian's libllvmspirvlib-14-dev on LLVM 14). Options as `llvm-spirv -r` uses by default: every
// extension accepted, built-ins in the OpenCL 1.2 representation that SPIR 1.2 consumers expect.
//
// LLVM 14 here and PoCL's LLVM 15 share the process: Debian versions every libLLVM symbol
// (LLVM_14, LLVM_15), so each library binds to its own. Compiled without RTTI, as libLLVM is.
// One translation at a time: the translator keeps process-wide state (its cl::opt options and
// built-in tables), and a module costs a millisecond or two, far less than PoCL's build of it.
#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "zecl.hpp"

namespace zecl {

bool translate_in_process(const void* spirv, size_t bytes, std::string& bitcode, std::string& err) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::istringstream in(std::string(static_cast<const char*>(spirv), bytes));
  llvm::LLVMContext context;
  SPIRV::TranslatorOpts opts;
  opts.enableAllExtensions();
  opts.setDesiredBIsRepresentation(SPIRV::BIsRepresentation::OpenCL12);
  llvm::Module* raw = nullptr;
  std::string why;
  const bool ok = llvm::readSpirv(context, opts, in, raw, why);
  std::unique_ptr<llvm::Module> module(raw);  // the context must outlive it: declared after
  if (!ok || !module)
    return err = "the SPIR-V translator rejected the module: " + (why.empty() ? "no reason given" : why),
           false;
  bitcode.clear();
  llvm::raw_string_ostream out(bitcode);
  llvm::WriteBitcodeToFile(*module, out);
  out.flush();
  return true;
}

}  // namespace zecl
