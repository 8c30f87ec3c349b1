# tests/comm/expect_abort.cmake — run a command that must fail fast with a given message.
#
# cmake -DCOMMAND="a|b|c" -DEXPECT_REGEX=... -DMAX_SECONDS=n -P expect_abort.cmake
# Passes iff the command exits non-zero, within MAX_SECONDS, and its stdout+stderr match EXPECT_REGEX
# (an empty regex skips the output check), and, if -DREJECT_REGEX is given, does not match it. A hang is killed at 3 x MAX_SECONDS and fails.
string(REPLACE "|" ";" command "${COMMAND}")
math(EXPR hard_limit "${MAX_SECONDS} * 3")
string(TIMESTAMP started "%s")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${hard_limit})
string(TIMESTAMP finished "%s")
math(EXPR elapsed "${finished} - ${started}")
message("${out}${err}")
message("exit status: ${rc}; elapsed: ${elapsed} s")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the job exited 0, but it had to fail")
endif()
if(rc MATCHES "timeout")
  message(FATAL_ERROR "the job hung and was killed after ${hard_limit} s")
endif()
if(elapsed GREATER MAX_SECONDS)
  message(FATAL_ERROR "the job took ${elapsed} s to fail; expected at most ${MAX_SECONDS} s")
endif()
if(NOT "${EXPECT_REGEX}" STREQUAL "" AND NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "the output does not match: ${EXPECT_REGEX}")
endif()
if(DEFINED REJECT_REGEX AND "${out}${err}" MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "the output matches what it must not: ${REJECT_REGEX}")
endif()
