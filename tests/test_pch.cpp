// Compiled only so that CMake builds the tests' precompiled header (test_pch.hpp); never run.
