# Included by the top-level CMakeLists.txt before any directory adds tests (tests/sdk is added
# from sdk/, before tests/): the cost table and the function each test directory defers to.
# The longest tests start first. CTest runs tests in descending COST; a clean clone has no timing
# history (Testing/Temporary/CTestCostData.txt, which replaces these after a run), so every cost
# was 0 and tests ran in the order they were declared, which put the longest ones (the OpenCL slice,
# the two-host and multi-process runs) at the end, with one of CI's two cores idle beside them:
# the release run's tests summed 327 s in a 206 s run on 2 cores. Seconds measured in that run
# (release build, 2026-12-07, load ~3); the same order holds under the sanitizers, where
# autodiff_deep and the conformance runs lead.
set(_ravel_test_costs
  opencl_conformance_smoke 59  sharding_async 21  hip_codegen 10  l0_conformance_smoke 10
  distributed_two_hosts 10  autodiff_deep 9  sharding_caller 8  dist_fault_kill_survivors 7
  dist_fault_kill_ddp_survivors 7  distributed_makemore_matches_one_process 6
  dist_fault_never_join_config 5  dist_fault_never_join 5  sdk_conformance_tbb_cpu_multidevice 5
  sdk_conformance_tbb_cpu_parallel 4  sdk_conformance_tbb_cpu_decomposed 4
  sdk_conformance_tbb_cpu_avx2_simd 4  sdk_conformance_tbb_cpu 4  sdk_conformance_tbb_cpu_portable_simd 4)
# Test names are scoped to the directory that made them (set_tests_properties cannot reach a
# subdirectory's tests before CMake 3.28), so each directory holding one of them starts with
# `cmake_language(DEFER CALL ravel_test_costs_here)`, which runs at that directory's end.
function(ravel_test_costs_here)
  set(costs ${_ravel_test_costs})
  while(costs)
    list(POP_FRONT costs name cost)
    if(TEST ${name})
      set_tests_properties(${name} PROPERTIES COST ${cost})
    endif()
  endwhile()
endfunction()
