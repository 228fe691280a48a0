// The umbrella header of the Ravel core.
#pragma once

#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"
#include "ravel/device.hpp"
#include "ravel/dlpack.hpp"
#include "ravel/dtype.hpp"
#include "ravel/error.hpp"
#include "ravel/io.hpp"
#include "ravel/jit.hpp"
#include "ravel/nn.hpp"
#include "ravel/runtime.hpp"
#include "ravel/schedule.hpp"
#include "ravel/tensor.hpp"
