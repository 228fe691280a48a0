// ravel::Jit — capture the kernels a function launches once, then replay them with new inputs
// (tinygrad's TinyJit, CUDA graphs). docs/jit.md has the rules and the measurements.
//
//   ravel::Jit step([&](const std::vector<Tensor>& in) {      // in: {contexts, targets}
//     Tensor loss = nn::cross_entropy(model(in[0]), in[1]);
//     opt.zero_grad(); loss.backward(); opt.step({loss});     // assigns new parameters
//     opt.zero_grad();                                        // leave no gradient behind
//     return std::vector<Tensor>{loss};
//   }, model.parameters());                                   // the state the step replaces
//   for (...) Tensor loss = step({x, y})[0];
//
// The first call with a given input signature (dtypes, shapes, devices) runs the function and
// records every kernel its realizations launch and which buffer each operand was: an input, a
// state tensor's buffer at the start of the call, a result of an earlier kernel of the call, or
// anything else (a constant: kept as it was). Later calls with that signature do not run the
// function: they bind the new inputs and the state's current buffers, allocate fresh results,
// launch the recorded kernels in order and rebind the state tensors to their new buffers. No
// graph is built, differentiated, keyed or planned.
//
// Valid when the function's kernels depend on its inputs and state only through their values
// (the same ops on the same shapes every call): what holds for a training step. Not replayed:
// host code (an item() inside, a branch on a value), data uploaded inside the function (it is a
// constant of the capture: pass changing data as an input), index bounds checks (as under
// jax.jit: an out-of-range index is not reported on a replay; one_hot gives a zero row). A
// capture fails with ValueError when the function leaves a tensor it computed alive that is
// neither an output nor state (e.g. a gradient kept in Tensor::grad, an optimizer moment not
// listed as state): a replay would not update it.
//
// Misuse the Jit reports: every member of a moved-from Jit throws ValueError; a call of a
// Jit while its own call is running (its function calls it, or two threads share it) throws
// ValueError; a tensor the function closed over (not state) that was assigned since the capture
// makes the next call run the function again (noticed when the capture became the only holder
// of the old buffer: a copy of the old tensor kept elsewhere hides it, so list such tensors as
// state).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel {

class Jit {
 public:
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  // `state`: tensors the function reads and may replace (Tensor::assign), e.g. parameters and
  // optimizer moments. They must outlive the Jit and be defined before the first call.
  explicit Jit(Function fn, std::vector<Tensor*> state = {});
  ~Jit();
  Jit(Jit&&) noexcept;
  Jit& operator=(Jit&&) noexcept;

  // Runs (captures) or replays the function; returns its outputs, realized.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  int64_t captures() const;          // calls that ran the function (one per new signature)
  int64_t replays() const;           // calls that replayed a capture
  int64_t kernels_per_call() const;  // kernels of the capture used last (0 before any call)
  void clear();                      // forget every capture: the next call runs the function

 private:
  struct Impl;
  Impl& checked_impl(const char* member) const;  // ValueError on a moved-from Jit
  std::unique_ptr<Impl> impl_;
};

}  // namespace ravel
