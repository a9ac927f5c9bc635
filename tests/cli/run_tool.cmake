# Runs the bsgemm tool once and checks what it did (cmake -P driver of the CLI tests).
#
#   cmake -DTOOL=<bsgemm> -DSPEC=<spec.cmake> -DWORK_DIR=<dir> -P run_tool.cmake
#
# SPEC (written by bsgemm_cli_test in CMakeLists.txt) sets:
#   ARGS         the tool's arguments
#   EXPECT_EXIT  the exit code
#   STDOUT       regexes stdout must match;   NOT_STDOUT  regexes it must not match
#   STDERR       regexes stderr must match
#   ERROR_LINE   TRUE: stderr is exactly one line, "bsgemm: error: ..."
#   JSON_FILE    a file the run writes with --json (relative to WORK_DIR), parsed after the run
#   JSON         "path=regex" items: the value at path (keys and indices joined by '.') must match
#   JSON_TYPES   "path=TYPE" items: string(JSON ... TYPE) of the value must be TYPE (NUMBER, NULL, ...)
# A JSON object with "status" PASS or FAIL must also be consistent: PASS needs max_rel_err <= tolerance,
# FAIL needs max_rel_err > tolerance or failures > 0.
cmake_minimum_required(VERSION 3.25)

foreach(required TOOL SPEC WORK_DIR)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "run_tool.cmake: -D${required}=... is required")
  endif()
endforeach()
include("${SPEC}")
if(NOT DEFINED EXPECT_EXIT)
  set(EXPECT_EXIT 0)
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(
  COMMAND "${TOOL}" ${ARGS}
  WORKING_DIRECTORY "${WORK_DIR}"
  RESULT_VARIABLE exit_code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)

set(failures "")
macro(fail what)
  string(APPEND failures "  - ${what}\n")
endmacro()

if(NOT exit_code STREQUAL "${EXPECT_EXIT}")
  fail("exit code ${exit_code}, expected ${EXPECT_EXIT}")
endif()
foreach(regex IN LISTS STDOUT)
  if(NOT out MATCHES "${regex}")
    fail("stdout does not match '${regex}'")
  endif()
endforeach()
foreach(regex IN LISTS NOT_STDOUT)
  if(out MATCHES "${regex}")
    fail("stdout matches '${regex}'")
  endif()
endforeach()
foreach(regex IN LISTS STDERR)
  if(NOT err MATCHES "${regex}")
    fail("stderr does not match '${regex}'")
  endif()
endforeach()
if(ERROR_LINE AND NOT err MATCHES "^bsgemm: error: [^\n]+\n$")
  fail("stderr is not exactly one line 'bsgemm: error: ...'")
endif()

# The value at a dotted path ("groups.1.0") of a JSON document, or fails the test.
function(json_at document path out_value out_type)
  string(REPLACE "." ";" keys "${path}")
  string(JSON value ERROR_VARIABLE error GET "${document}" ${keys})
  string(JSON type ERROR_VARIABLE type_error TYPE "${document}" ${keys})
  if(error OR type_error)
    set(${out_type} "MISSING" PARENT_SCOPE)
  else()
    set(${out_type} "${type}" PARENT_SCOPE)
  endif()
  set(${out_value} "${value}" PARENT_SCOPE)
endfunction()

if(DEFINED JSON_FILE)
  if(NOT EXISTS "${WORK_DIR}/${JSON_FILE}")
    fail("the run wrote no ${JSON_FILE}")
  else()
    file(READ "${WORK_DIR}/${JSON_FILE}" document)
    string(JSON kind ERROR_VARIABLE parse_error TYPE "${document}")
    if(parse_error)
      fail("${JSON_FILE} is not valid JSON: ${parse_error}")
    else()
      foreach(item IN LISTS JSON)
        string(FIND "${item}" "=" eq)
        string(SUBSTRING "${item}" 0 ${eq} path)
        math(EXPR value_start "${eq} + 1")
        string(SUBSTRING "${item}" ${value_start} -1 regex)
        json_at("${document}" "${path}" value type)
        if(type STREQUAL "MISSING")
          fail("${JSON_FILE} has no ${path}")
        elseif(NOT value MATCHES "${regex}")
          fail("${JSON_FILE}: ${path} = '${value}' does not match '${regex}'")
        endif()
      endforeach()
      foreach(item IN LISTS JSON_TYPES)
        string(FIND "${item}" "=" eq)
        string(SUBSTRING "${item}" 0 ${eq} path)
        math(EXPR value_start "${eq} + 1")
        string(SUBSTRING "${item}" ${value_start} -1 expected_type)
        json_at("${document}" "${path}" value type)
        if(NOT type STREQUAL expected_type)
          fail("${JSON_FILE}: ${path} is ${type}, expected ${expected_type}")
        endif()
      endforeach()
      if(kind STREQUAL "OBJECT")
        json_at("${document}" "status" status status_type)
        json_at("${document}" "max_rel_err" error error_type)
        json_at("${document}" "tolerance" tolerance tolerance_type)
        json_at("${document}" "failures" bad_elements bad_type)
        if(status STREQUAL "PASS" AND NOT (error_type STREQUAL "NUMBER" AND NOT error GREATER tolerance))
          fail("${JSON_FILE}: status PASS but max_rel_err ${error} exceeds tolerance ${tolerance}")
        endif()
        if(status STREQUAL "FAIL" AND NOT (error GREATER tolerance OR bad_elements GREATER 0))
          fail("${JSON_FILE}: status FAIL but max_rel_err ${error} <= tolerance ${tolerance} and no failures")
        endif()
      endif()
    endif()
  endif()
endif()

if(failures)
  list(JOIN ARGS " " command_line)
  message(FATAL_ERROR "bsgemm ${command_line}\n${failures}--- exit code ${exit_code}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
