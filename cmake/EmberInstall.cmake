# Installs the libraries, headers and a CMake package so that find_package(ember) works.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
get_property(_ember_targets GLOBAL PROPERTY EMBER_INSTALL_TARGETS)
install(TARGETS ${_ember_targets} ember EXPORT emberTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir core autograd nn data parallel)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/${dir}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/core/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/core)
install(FILES ember/ember.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/ember)
install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
configure_package_config_file(cmake/emberConfig.cmake.in ${PROJECT_BINARY_DIR}/emberConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/emberConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/emberConfig.cmake ${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
