# Code, tests, scripts and build files say why, not which tracker item asked: a comment such as
# "issue N, class M" means nothing to a reader without the tracker, so the reason is written
# out instead (docs/ may cite issues: they are the project's record). Usage:
#   cmake -DROOT=<dir> -P check_no_issue_numbers.cmake
# Fails listing every file:line that names an issue number.
set(globs)
foreach(dir core sdk plugins tests tools examples bench fuzz scripts cmake)
  foreach(ext cpp hpp h c cu cl py sh cmake txt json)
    list(APPEND globs ${ROOT}/${dir}/*.${ext})
  endforeach()
endforeach()
file(GLOB_RECURSE files ${globs})
if(EXISTS ${ROOT}/CMakeLists.txt)
  list(APPEND files ${ROOT}/CMakeLists.txt)
endif()
set(found "")
foreach(f ${files})
  file(RELATIVE_PATH rel ${ROOT} ${f})
  if(rel MATCHES "^tests/architecture/fixture_issue/")  # the check's own test data
    continue()
  endif()
  file(STRINGS ${f} lines REGEX "[Ii]ssue #?[0-9]")
  foreach(l ${lines})
    string(APPEND found "  ${rel}: ${l}\n")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "issue numbers in code (write the reason instead):\n${found}")
endif()
message(STATUS "no issue numbers in ${ROOT}")
