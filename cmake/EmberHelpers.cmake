# Shared build helpers: warnings, sanitizers, library and test registration.
# -Werror with GCC, the compiler of every build we ship and test; clang builds only the fuzz
# targets (preset fuzz) and warns there without failing (e.g. on GCC's own pragmas).
set(EMBER_WARNINGS -Wall -Wextra $<$<CXX_COMPILER_ID:GNU>:-Werror> -Wno-unused-parameter
                   $<$<CXX_COMPILER_ID:Clang>:-Wno-unknown-pragmas>)

# EMBER_SANITIZE is one sanitizer or a comma list ("address,undefined", the asan-ubsan preset),
# passed to the compiler as one -fsanitize= flag. EMBER_SANITIZE_ADDRESS / _UNDEFINED / _THREAD
# say which are in it, for the places that set per-sanitizer options.
set(EMBER_SANITIZE_ADDRESS OFF)
set(EMBER_SANITIZE_UNDEFINED OFF)
set(EMBER_SANITIZE_THREAD OFF)
string(REPLACE "," ";" _ember_sanitizers "${EMBER_SANITIZE}")
foreach(_s IN LISTS _ember_sanitizers)
  if(_s STREQUAL "address")
    set(EMBER_SANITIZE_ADDRESS ON)
  elseif(_s STREQUAL "undefined")
    set(EMBER_SANITIZE_UNDEFINED ON)
  elseif(_s STREQUAL "thread")
    set(EMBER_SANITIZE_THREAD ON)
  else()
    message(FATAL_ERROR "EMBER_SANITIZE: unknown sanitizer '${_s}' in '${EMBER_SANITIZE}' "
                        "(expected a comma list of address, undefined, thread)")
  endif()
endforeach()
if(EMBER_SANITIZE_THREAD AND EMBER_SANITIZE_ADDRESS)
  message(FATAL_ERROR "EMBER_SANITIZE: thread and address cannot be combined")
endif()
# UBSan stops at the first report (a report is a failure, not a warning), whether or not the
# test's environment says halt_on_error; see also ember_sanitizer_test_env.
set(EMBER_SANITIZE_FLAGS -fsanitize=${EMBER_SANITIZE})
if(EMBER_SANITIZE_UNDEFINED)
  list(APPEND EMBER_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
endif()
# EMBER_BUILD_FUZZ (clang): every ember target gets libFuzzer's coverage instrumentation; the
# fuzz targets link libFuzzer itself (fuzz/CMakeLists.txt).
set(EMBER_FUZZ_FLAGS "")
if(EMBER_BUILD_FUZZ)
  set(EMBER_FUZZ_FLAGS -fsanitize=fuzzer-no-link)
endif()

function(ember_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${EMBER_WARNINGS}>)
  target_compile_features(${tgt} PUBLIC cxx_std_20)
  if(EMBER_SANITIZE)
    # The sanitizers' instrumentation gives GCC 12's flow-based warnings false positives that
    # -Werror turns into build failures; the release build keeps both warnings.
    #   -Wno-maybe-uninitialized: -fsanitize=address, inside libstdc++'s own std::regex
    #     (std::function members of _State, used by dataloader_failure_test);
    #   -Wno-array-bounds: -fsanitize=undefined, std::vector<Tensor*>'s initializer list of two
    #     pointers grown by push_back in autograd/functions/rnn.cpp ("subscript 2 is outside").
    target_compile_options(${tgt} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${EMBER_SANITIZE_FLAGS} ${EMBER_FUZZ_FLAGS} -fno-omit-frame-pointer>
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized -Wno-array-bounds>)
    target_link_options(${tgt} PUBLIC ${EMBER_SANITIZE_FLAGS})
  endif()
endfunction()

# ember_link_private(target DEPS dep... [INSTALL_LINK_DEPS imported-target...])
# See Note [Private dependencies] in the top-level CMakeLists.txt: DEPS are linked PRIVATE for
# the build only, never exported; INSTALL_LINK_DEPS are what a static library's consumer must
# link instead (the ember_deps:: targets of cmake/emberLinkDependencies.cmake).
function(ember_link_private tgt)
  cmake_parse_arguments(A "" "" "DEPS;INSTALL_LINK_DEPS" ${ARGN})
  foreach(dep IN LISTS A_DEPS)
    target_link_libraries(${tgt} PRIVATE $<BUILD_INTERFACE:${dep}>)
  endforeach()
  if(NOT EMBER_BUILD_SHARED)
    foreach(dep IN LISTS A_INSTALL_LINK_DEPS)
      target_link_libraries(${tgt} INTERFACE $<INSTALL_INTERFACE:${dep}>)
    endforeach()
  endif()
endfunction()

# ember_add_library(name SOURCES ... DEPS ... [PRIVATE_DEPS ...] [INSTALL_LINK_DEPS ...])
# Static, or shared with EMBER_BUILD_SHARED. Installed headers are included as <ember/...>.
function(ember_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS;INSTALL_LINK_DEPS" ${ARGN})
  if(EMBER_BUILD_SHARED)
    add_library(${name} SHARED ${A_SOURCES})
  else()
    add_library(${name} STATIC ${A_SOURCES})
  endif()
  add_library(ember::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  ember_link_private(${name} DEPS ${A_PRIVATE_DEPS} INSTALL_LINK_DEPS ${A_INSTALL_LINK_DEPS})
  ember_target_defaults(${name})
  set_property(GLOBAL APPEND PROPERTY EMBER_INSTALL_TARGETS ${name})
endfunction()

# The sanitizer runtime options every test runs with.
# Thread: the suppressions name only uninstrumented libraries (tests/support/tsan.supp);
# die_after_fork=0 lets the tests that fork a multi-threaded process (the thread pool's fork
# tests, DataLoader workers) go on, which TSan otherwise refuses outright.
# Undefined: halt_on_error and a stack trace (the -fno-sanitize-recover above already stops).
# Address: allocator_may_return_null=1, so that an allocation too large to exist fails as it does
# without ASan (the checked-shape and packed-sequence tests expect OutOfMemoryError where ASan's
# allocator would otherwise abort with allocation-size-too-big); otherwise the defaults. A test
# that must differ appends its own ASAN_OPTIONS, repeating that flag (process_group_mpi_test:
# detect_leaks=0).
function(ember_sanitizer_test_env test_name)
  if(EMBER_SANITIZE_ADDRESS)
    set_property(TEST ${test_name} APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=allocator_may_return_null=1")
  endif()
  if(EMBER_SANITIZE_THREAD)
    set_property(TEST ${test_name} APPEND PROPERTY ENVIRONMENT
      "TSAN_OPTIONS=die_after_fork=0 suppressions=${PROJECT_SOURCE_DIR}/tests/support/tsan.supp")
  endif()
  if(EMBER_SANITIZE_UNDEFINED)
    set_property(TEST ${test_name} APPEND PROPERTY ENVIRONMENT
      "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
  endif()
endfunction()

# ember_add_test(name SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s] [SERIAL])
function(ember_add_test name)
  cmake_parse_arguments(A "SERIAL" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  ember_target_defaults(${name})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "EMBER_BUILD_DIR=${PROJECT_BINARY_DIR};EMBER_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  ember_sanitizer_test_env(${name})
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
  if(A_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
