# Script mode (install_consumer_test): for ember as built (EMBER_BUILD_DIR), install to a
# prefix, move the prefix elsewhere (nothing may point at the old place), check the installed
# tree, then configure the consumer project with -DCMAKE_PREFIX_PATH=<moved prefix> while Boost,
# MPI and nlohmann_json are unfindable (the package must not look for them: Note [Private
# dependencies]), build it, run it, and run it again under <moved prefix>/bin/ember-run.
# Note [Install test kinds]: each build checks the library kind it built. CI covers both
# without a build of its own for this test: the release build (cpu preset) is static, the
# asan-ubsan build is shared (EMBER_BUILD_SHARED=ON in that preset). With
# EMBER_INSTALL_TEST_BOTH_KINDS=1 in the environment the test also builds the other kind in
# OTHER_BUILD_DIR (libraries and ember-run only, no CUDA, -O0: 347 s at -j2 from scratch on the
# 2-core development machine) and checks it the same way.
# Inputs: EMBER_SOURCE_DIR, EMBER_BUILD_DIR, EMBER_BUILD_SHARED, EMBER_MPI, OTHER_BUILD_DIR,
# CONSUMER_SOURCE_DIR, WORK_DIR, CXX_COMPILER, CXX_LAUNCHER (may be empty).

cmake_policy(VERSION 3.25)  # script mode starts without policies (IN_LIST)

function(run_or_fail what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}${err}" PARENT_SCOPE)
endfunction()

# The installed tree: headers under include/ember/ naming each other as "ember/...", none at
# the include root, none including a private dependency; CMake files without a path of this
# machine (sources, build tree, the prefix before the move, system library paths).
function(check_installed prefix old_prefix build_dir)
  foreach(f include/ember/ember.h include/ember/nn/rnn.h include/ember/core/config.h bin/ember-run)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  foreach(d core autograd nn data parallel)
    if(EXISTS "${prefix}/include/${d}")
      message(FATAL_ERROR "include/${d} installed at the include root (collides with a project's own ${d}/)")
    endif()
  endforeach()
  file(GLOB_RECURSE headers "${prefix}/include/*.h")
  list(LENGTH headers n)
  if(n LESS 50)
    message(FATAL_ERROR "only ${n} headers installed")
  endif()
  foreach(h IN LISTS headers)
    file(STRINGS "${h}" includes REGEX "^#include ")
    foreach(line IN LISTS includes)
      if(line MATCHES "^#include \"(core|autograd|nn|data|parallel)/")
        message(FATAL_ERROR "${h}: '${line}' not rewritten to ember/")
      elseif(line MATCHES "^#include <(boost/|nlohmann/|mpi\\.h)")
        message(FATAL_ERROR "${h}: '${line}' includes a private dependency")
      elseif(line MATCHES "^#include \"(ember/[^\"]+)\"" AND NOT EXISTS "${prefix}/include/${CMAKE_MATCH_1}")
        message(FATAL_ERROR "${h}: '${line}' names a header that is not installed")
      endif()
    endforeach()
  endforeach()
  file(GLOB cmake_files "${prefix}/lib/cmake/ember/*.cmake")
  foreach(f IN LISTS cmake_files)
    file(READ "${f}" text)
    foreach(path "${EMBER_SOURCE_DIR}" "${build_dir}" "${old_prefix}" "/usr/")
      string(FIND "${text}" "${path}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "${f} names '${path}', a path of the build machine")
      endif()
    endforeach()
  endforeach()
endfunction()

# The README's "API at a glance" block (its first ```cpp block after that heading) is what the
# consumer proves: every code line of it, without comments and with runs of blanks as one,
# must be a line of consumer/main.cpp (the same normalization). Runs before anything is built.
function(normalized_code_lines text out)
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(result "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "/\\*[^*]*\\*/" "" line "${line}")
    string(REGEX REPLACE "//.*$" "" line "${line}")
    string(REGEX REPLACE "[ \t]+" " " line "${line}")
    string(STRIP "${line}" line)
    if(NOT line STREQUAL "")
      list(APPEND result "${line}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(check_readme_block_in_consumer)
  file(READ "${EMBER_SOURCE_DIR}/README.md" readme)
  string(FIND "${readme}" "\n## API at a glance" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md has no '## API at a glance' section")
  endif()
  string(SUBSTRING "${readme}" ${at} -1 readme)
  string(FIND "${readme}" "```cpp\n" start)
  if(start EQUAL -1)
    message(FATAL_ERROR "README.md's 'API at a glance' has no ```cpp block")
  endif()
  math(EXPR start "${start} + 7")
  string(SUBSTRING "${readme}" ${start} -1 readme)
  string(FIND "${readme}" "\n```" end)
  string(SUBSTRING "${readme}" 0 ${end} block)
  normalized_code_lines("${block}" readme_lines)
  file(READ "${CONSUMER_SOURCE_DIR}/main.cpp" consumer)
  normalized_code_lines("${consumer}" consumer_lines)
  list(LENGTH readme_lines n)
  if(n LESS 20)
    message(FATAL_ERROR "README.md's 'API at a glance' block has only ${n} code lines")
  endif()
  set(missing "")
  foreach(line IN LISTS readme_lines)
    if(NOT line IN_LIST consumer_lines)
      string(REPLACE "<semicolon>" ";" line "${line}")
      string(APPEND missing "\n  ${line}")
    endif()
  endforeach()
  if(missing)
    message(FATAL_ERROR "lines of README.md's 'API at a glance' that tests/install/consumer/main.cpp does not "
                        "compile and run (add them there, or correct the README):${missing}")
  endif()
  message(STATUS "README.md's 'API at a glance': all ${n} code lines are in the consumer")
endfunction()

# install, move, check, consume, run; `shared` says which kind build_dir holds.
function(check_variant name build_dir shared)
  set(dir "${WORK_DIR}/${name}")
  file(REMOVE_RECURSE "${dir}")
  run_or_fail("cmake --install (${name})" ${CMAKE_COMMAND} --install "${build_dir}" --prefix "${dir}/prefix")
  file(RENAME "${dir}/prefix" "${dir}/moved")
  check_installed("${dir}/moved" "${dir}/prefix" "${build_dir}")
  set(launcher "")
  if(CXX_LAUNCHER)
    set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER}")
  endif()
  run_or_fail("configuring the consumer with find_package(ember) (${name})"
    ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${dir}/consumer" -G Ninja
      "-DCMAKE_PREFIX_PATH=${dir}/moved" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${launcher}
      -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
  run_or_fail("building the consumer (${name})" ${CMAKE_COMMAND} --build "${dir}/consumer")
  # Static: ember is inside the program; shared: the program needs libember_*.so, and libmpi
  # only through them (a one-process program does not link libmpi itself).
  find_program(READELF readelf)
  if(READELF)
    run_or_fail("readelf" ${READELF} -d "${dir}/consumer/consumer")
    set(needed "${last_output}")
    if(shared AND NOT needed MATCHES "libember_core\\.so")
      message(FATAL_ERROR "the ${name} consumer does not load libember_core.so:\n${needed}")
    elseif(NOT shared AND needed MATCHES "libember_")
      message(FATAL_ERROR "the ${name} consumer loads an ember shared library:\n${needed}")
    endif()
    if(shared AND needed MATCHES "libmpi")
      message(FATAL_ERROR "the ${name} consumer links libmpi itself:\n${needed}")
    endif()
  endif()
  # Run directly, the consumer's process group (one rank, tcp) takes torchrun's variables from
  # here; rank 0 hosts the store on a port the kernel just handed out.
  free_port(port)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
                    MASTER_ADDR=127.0.0.1 MASTER_PORT=${port} "${dir}/consumer/consumer"
                  WORKING_DIRECTORY "${dir}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "grad=6" OR NOT out MATCHES "world_size=1"
     OR NOT out MATCHES "own headers: my_app/core my_app/nn")
    message(FATAL_ERROR "the ${name} consumer failed (rc=${rc}): ${out}${err}")
  endif()
  message(STATUS "${name} consumer printed: ${out}")
  execute_process(COMMAND "${dir}/moved/bin/ember-run" --nproc-per-node 1 "${dir}/consumer/consumer"
                  WORKING_DIRECTORY "${dir}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "grad=6" OR NOT out MATCHES "world_size=1")
    message(FATAL_ERROR "the ${name} consumer under <prefix>/bin/ember-run failed (rc=${rc}): ${out}${err}")
  endif()
  message(STATUS "${name} consumer under ember-run printed: ${out}")
endfunction()

# A TCP port that was free a moment ago (bound to port 0 and released), for MASTER_PORT.
function(free_port out)
  find_program(PYTHON3 python3 REQUIRED)
  execute_process(COMMAND ${PYTHON3} -c
    "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    OUTPUT_VARIABLE port OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT port MATCHES "^[0-9]+$")
    message(FATAL_ERROR "could not find a free TCP port with python3 (${rc}): ${port}")
  endif()
  set(${out} ${port} PARENT_SCOPE)
endfunction()

check_readme_block_in_consumer()

if(EMBER_BUILD_SHARED)
  set(built shared)
  set(other static)
  set(other_shared OFF)
else()
  set(built static)
  set(other shared)
  set(other_shared ON)
endif()
check_variant(${built} "${EMBER_BUILD_DIR}" ${EMBER_BUILD_SHARED})

if(NOT "$ENV{EMBER_INSTALL_TEST_BOTH_KINDS}" STREQUAL "1")
  message(STATUS "checked the ${built} package; set EMBER_INSTALL_TEST_BOTH_KINDS=1 to also build and "
                 "check the ${other} one here (Note [Install test kinds])")
  return()
endif()
# The other library kind: libraries and ember-run only, no CUDA, no sanitizer, at -O0 (what is
# checked is the package, not speed), kept in OTHER_BUILD_DIR between runs.
set(launcher "")
if(CXX_LAUNCHER)
  set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER}")
endif()
run_or_fail("configuring ember with EMBER_BUILD_SHARED=${other_shared}"
  ${CMAKE_COMMAND} -S "${EMBER_SOURCE_DIR}" -B "${OTHER_BUILD_DIR}" -G Ninja "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    ${launcher} -DCMAKE_BUILD_TYPE=InstallTest -DCMAKE_CXX_FLAGS_INSTALLTEST=-O0 -DEMBER_BUILD_SHARED=${other_shared}
    -DEMBER_CUDA=OFF -DEMBER_SANITIZE= -DEMBER_MPI=${EMBER_MPI} -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCH=OFF
    -DEMBER_BUILD_EXAMPLES=OFF)
set(jobs "$ENV{EMBER_BUILD_JOBS}")
if(NOT jobs)
  cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
endif()
run_or_fail("building ember with EMBER_BUILD_SHARED=${other_shared}"
  ${CMAKE_COMMAND} --build "${OTHER_BUILD_DIR}" --parallel ${jobs})
check_variant(${other} "${OTHER_BUILD_DIR}" ${other_shared})
