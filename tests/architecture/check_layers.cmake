# Checks that core/src's folders depend on each other in one direction only (Note [Layering] in
# core/src/graph/engine.hpp): every #include "folder/..." of a file under src/<A>/, and every
# include of a public header core/include/ravel/X (owned by the folder that implements it), must
# name a folder that comes no later than A in LAYERS_FILE. Public headers are checked the same way
# against their own owner. Includes of anything else (system, Boost, the SDK's ravel/backend.h and
# ravel/op_table.hpp) are not dependencies between folders and are ignored.
#
#   cmake -DCORE_DIR=<core> -DLAYERS_FILE=<layers.txt> -P check_layers.cmake
# Exit status 0 and "layering ok" when clean; otherwise one line per offending include.
cmake_minimum_required(VERSION 3.20)

foreach(var CORE_DIR LAYERS_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_layers.cmake: pass -D${var}=...")
  endif()
endforeach()
get_filename_component(CORE_DIR "${CORE_DIR}" ABSOLUTE)

# ---- the order and the owners of public headers -------------------------------------------------
file(STRINGS "${LAYERS_FILE}" lines)
set(folders "")
foreach(line IN LISTS lines)
  if(line MATCHES "^folder[ \t]+([A-Za-z0-9_]+)")
    list(APPEND folders "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^public[ \t]+([^ \t]+)[ \t]+([A-Za-z0-9_]+)")
    set(owner_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    list(APPEND public_headers "${CMAKE_MATCH_1}")
  endif()
endforeach()
function(rank_of folder out)
  list(FIND folders "${folder}" r)
  set(${out} ${r} PARENT_SCOPE)
endfunction()

set(errors "")
set(edges "")

# The folder an include names, or "" when it is not a dependency between folders.
function(target_folder include out)
  set(result "")
  if(include MATCHES "^ravel/")
    if(DEFINED owner_${include})
      set(result "${owner_${include}}")
    elseif(EXISTS "${CORE_DIR}/include/${include}")
      set(result "?public:${include}")
    endif()
  elseif(include MATCHES "^([A-Za-z0-9_]+)/")
    # (Two steps: CMAKE_MATCH_1 is only set once MATCHES has run.)
    if(IS_DIRECTORY "${CORE_DIR}/src/${CMAKE_MATCH_1}")
      set(result "${CMAKE_MATCH_1}")
    endif()
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# Checks every include of `file` against the folder `from`.
macro(check_file file from)
  rank_of("${from}" from_rank)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]+[\">]")
  foreach(inc IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*" "\\1" path "${inc}")
    target_folder("${path}" to)
    if("${to}" STREQUAL "")
      continue()
    endif()
    file(RELATIVE_PATH rel "${CORE_DIR}" "${file}")
    if(to MATCHES "^\\?public:")
      list(APPEND errors "${rel}: includes ${path}, a public header with no owner in ${LAYERS_FILE}")
      continue()
    endif()
    rank_of("${to}" to_rank)
    if(to_rank GREATER from_rank)
      list(APPEND errors "${rel}: ${from} includes ${path} of ${to}, which comes after it in the pipeline")
    elseif(NOT "${to}" STREQUAL "${from}" AND "${file}" MATCHES "/src/")
      list(APPEND edges "${from} -> ${to}")
    endif()
  endforeach()
endmacro()

# ---- core/src ----------------------------------------------------------------------------------
file(GLOB children RELATIVE "${CORE_DIR}/src" "${CORE_DIR}/src/*")
foreach(folder IN LISTS children)
  if(NOT IS_DIRECTORY "${CORE_DIR}/src/${folder}")
    continue()
  endif()
  rank_of("${folder}" r)
  if(r EQUAL -1)
    list(APPEND errors "src/${folder}/: a folder that is not in ${LAYERS_FILE}: place it in the pipeline")
    continue()
  endif()
  file(GLOB_RECURSE sources "${CORE_DIR}/src/${folder}/*.hpp" "${CORE_DIR}/src/${folder}/*.cpp"
       "${CORE_DIR}/src/${folder}/*.h")
  foreach(f IN LISTS sources)
    check_file("${f}" "${folder}")
  endforeach()
endforeach()

# ---- core/include/ravel --------------------------------------------------------------------------
file(GLOB headers RELATIVE "${CORE_DIR}/include" "${CORE_DIR}/include/ravel/*.hpp")
foreach(h IN LISTS headers)
  if(NOT DEFINED owner_${h})
    list(APPEND errors "include/${h}: a public header with no owner in ${LAYERS_FILE}")
    continue()
  endif()
  check_file("${CORE_DIR}/include/${h}" "${owner_${h}}")
endforeach()

if(errors)
  list(LENGTH errors n)
  string(REPLACE ";" "\n  " text "${errors}")
  message(FATAL_ERROR "layering violated (${n}); order: ${folders}\n  ${text}")
endif()
list(REMOVE_DUPLICATES edges)
list(SORT edges)
string(REPLACE ";" ", " edge_text "${edges}")
message(STATUS "layering ok (${folders}); dependencies: ${edge_text}")
