# Checks the count docs/ops.md gives for "what adding an elementwise primitive touches" against
# the tree. A file is a *place* when it names every probe row below: the float unary rows, which
# no code treats specially, so a file naming all five of them enumerates the op table by hand and
# a new row of their kind (ERF, TANH) needs an edit there. A row is named as RVL_OP_X, AluOp::X, a
# bare X token, or (the public method) `Tensor x() const`. The set of such files under core/,
# sdk/, plugins/, tools/ and examples/ must be exactly the files docs/ops.md lists between
# <!-- op-places --> and <!-- /op-places --> plus those it lists between <!-- op-places-not -->
# and <!-- /op-places-not --> (files that name the rows as data, say why), and the count it
# states as **N files** must be the length of the first list.
#
#   cmake -DSOURCE_DIR=<repo> -DOPS_DOC=<docs/ops.md> -P check_op_places.cmake
cmake_minimum_required(VERSION 3.16)  # IN_LIST
set(probe RECIP SQRT EXP2 LOG2 SIN)

file(READ ${OPS_DOC} doc)
function(listed begin end out)
  string(FIND "${doc}" "<!-- ${begin} -->" b)
  string(FIND "${doc}" "<!-- ${end} -->" e)
  if(b LESS 0 OR e LESS b)
    message(FATAL_ERROR "${OPS_DOC}: no <!-- ${begin} --> ... <!-- ${end} --> list")
  endif()
  math(EXPR length "${e} - ${b}")
  string(SUBSTRING "${doc}" ${b} ${length} block)
  string(REGEX MATCHALL "\n- `[^`]+`" items "${block}")
  set(paths)
  foreach(item ${items})
    string(REGEX REPLACE "\n- `([^`]+)`" "\\1" path "${item}")
    list(APPEND paths ${path})
  endforeach()
  set(${out} ${paths} PARENT_SCOPE)
endfunction()
listed("op-places" "/op-places" places)
listed("op-places-not" "/op-places-not" not_places)

set(failures "")
string(REGEX MATCH "\\*\\*([0-9]+) files\\*\\*" stated "${doc}")
list(LENGTH places n_places)
if(NOT stated)
  string(APPEND failures "\n  ${OPS_DOC} states no count as **N files**")
elseif(NOT CMAKE_MATCH_1 EQUAL n_places)
  string(APPEND failures "\n  ${OPS_DOC} says **${CMAKE_MATCH_1} files** but lists ${n_places}")
endif()

set(found)
foreach(top core sdk plugins tools examples)
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${top}/*.c ${SOURCE_DIR}/${top}/*.cpp
       ${SOURCE_DIR}/${top}/*.hpp ${SOURCE_DIR}/${top}/*.h)
  foreach(f ${sources})
    file(READ ${SOURCE_DIR}/${f} text)
    set(all TRUE)
    foreach(op ${probe})
      string(TOLOWER ${op} method)
      if(NOT text MATCHES "(RVL_OP_|[^A-Za-z0-9_])${op}([^A-Za-z0-9_]|$)" AND NOT text MATCHES "Tensor ${method}\\(\\) const")
        set(all FALSE)
        break()
      endif()
    endforeach()
    if(all)
      list(APPEND found ${f})
    endif()
  endforeach()
endforeach()

foreach(f ${places} ${not_places})
  if(NOT f IN_LIST found)
    string(APPEND failures "\n  ${f}: listed in ${OPS_DOC}, but it does not name every row of ${probe}")
  endif()
endforeach()
foreach(f ${found})
  if(NOT f IN_LIST places AND NOT f IN_LIST not_places)
    string(APPEND failures "\n  ${f}: names every row of ${probe} (a new row needs an edit here?) but ${OPS_DOC} does not list it")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "FAIL: docs/ops.md's places for a new elementwise primitive disagree with the tree:${failures}")
endif()
message(STATUS "PASS: ${n_places} places for a new elementwise primitive, as docs/ops.md says")
