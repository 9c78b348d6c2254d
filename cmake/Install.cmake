# Install rules and the CMake package: find_package(pickle) + target_link_libraries(x pickle::pickle).
include(CMakePackageConfigHelpers)

install(TARGETS pickle pickle_cli
  EXPORT pickleTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/pickle DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY tools/report/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pickle/report FILES_MATCHING PATTERN "*.py")
install(FILES ${PROJECT_BINARY_DIR}/include/pickle/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pickle)
install(EXPORT pickleTargets NAMESPACE pickle:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pickle)

configure_package_config_file(cmake/pickleConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pickleConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pickle)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pickleConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pickleConfig.cmake ${PROJECT_BINARY_DIR}/pickleConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pickle)
