// ravel-peer-onednn's conv2d workload (onednn_conv.cpp): size n, c, o, hw, k. Prints one result
// line of the peer protocol; returns the process exit code.
#pragma once

#include <string>
#include <vector>

int run_onednn_conv(const std::vector<long>& size, const std::string& size_json, int warmup, int reps);
