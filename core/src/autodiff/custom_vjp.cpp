// ravel::custom_vjp: the public face of Note [Custom derivatives] (tensor/custom_vjp.hpp).
#include "tensor/custom_vjp.hpp"

#include "ravel/autodiff.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

Tensor custom_vjp(const Tensor& output, const std::vector<Tensor>& inputs, VjpRule rule, std::string name) {
  check_defined(output, "custom_vjp");
  RAVEL_CHECK(static_cast<bool>(rule), ValueError, "custom_vjp '", name, "': the rule is empty");
  RAVEL_CHECK(is_float(output.dtype()), DTypeError, "custom_vjp '", name, "': the output must be a float tensor, got ",
              dtype_name(output.dtype()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_defined(inputs[i], "custom_vjp");
    RAVEL_CHECK(is_float(inputs[i].dtype()), DTypeError, "custom_vjp '", name, "': input ", i,
                " must be a float tensor (only they carry gradients), got ", dtype_name(inputs[i].dtype()));
  }
  auto r = std::make_shared<CustomRule>();
  r->name = std::move(name);
  r->vjp = std::move(rule);
  return with_custom_vjp(output, inputs, std::move(r));
}

}  // namespace ravel
