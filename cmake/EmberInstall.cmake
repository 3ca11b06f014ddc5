# Installs the libraries, ember-run, the headers under include/ember/ and a relocatable CMake
# package, so that a project writes find_package(ember), links ember::ember and includes
# <ember/ember.h> or <ember/nn/rnn.h>. See Note [Installed headers] and Note [Private
# dependencies]; tests/install/run_install_test.cmake checks both for static and shared builds.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
get_property(_ember_targets GLOBAL PROPERTY EMBER_INSTALL_TARGETS)
install(TARGETS ${_ember_targets} ember EXPORT emberTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Note [Installed headers]
# In the source tree every file includes by path from the repository root ("core/tensor.h").
# Installed that way, the headers would sit at the include root as core/,
# nn/, data/, parallel/ and collide with a project's own folders; they go under include/ember/
# instead, so a consumer writes #include <ember/nn/rnn.h>. The installed copies must then name
# each other as "ember/core/tensor.h": the install step rewrites the project-internal quoted
# includes (#include "core/..." for core, autograd, nn, data, parallel, tensorboard, profiler)
# in the copies it installs, and leaves the sources alone. Rewriting the sources instead would touch every file
# of the tree at once while many people edit it, and would make every in-tree include longer
# for the sake of the installed layout only. A header that includes a private dependency
# (Boost, nlohmann_json, MPI, NCCL: Note [Private dependencies]) is an implementation detail
# of a .cpp and is not installed. cmake/EmberInstallHeaders.cmake does the work at install
# time (so it always sees the current headers); the generated core/config.h goes with them.
install(CODE "
  set(EMBER_HEADERS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(EMBER_HEADERS_CONFIG_H \"${PROJECT_BINARY_DIR}/include/core/config.h\")
  set(EMBER_HEADERS_STAGING_DIR \"${PROJECT_BINARY_DIR}/installed_headers\")
  set(EMBER_HEADERS_DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/EmberInstallHeaders.cmake\")
")

# The package: no path of the build machine (Note [Private dependencies]); the config finds
# its dependencies on the consumer's machine.
install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
configure_package_config_file(cmake/emberConfig.cmake.in ${PROJECT_BINARY_DIR}/emberConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/emberConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/emberConfig.cmake ${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
  cmake/emberLinkDependencies.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
