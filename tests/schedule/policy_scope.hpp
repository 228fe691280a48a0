// The fusion policies in order, and a scope that sets one and restores the default on exit
// (shared by the scheduler tests).
#pragma once

#include "ravel/ravel.hpp"

inline const ravel::FusionPolicy kPolicies[] = {ravel::FusionPolicy::None, ravel::FusionPolicy::Elementwise,
                                                ravel::FusionPolicy::Reduce, ravel::FusionPolicy::Full};

struct PolicyScope {
  explicit PolicyScope(ravel::FusionPolicy p) {
    ravel::FusionOptions o;
    o.policy = p;
    ravel::set_fusion_options(o);
  }
  ~PolicyScope() { ravel::set_fusion_options(ravel::FusionOptions{}); }
};
