# Install rules and the RavelConfig.cmake package.
#
# Layout (relative to CMAKE_INSTALL_PREFIX):
#   include/ravel/...             core and SDK headers
#   lib/libravel_core.so          the runtime
#   lib/libravel_reference.a      the SDK's reference interpreter (for backend tests)
#   lib/libravel_validate.a       the SDK's kernel validator (for backend plugins)
#   lib/libravel_lowering.a       the shared GPU lowering (for GPU backend plugins; sdk/lowering)
#   lib/ravel/plugins/*.so        backend plugins: an installed core finds them next to itself
#   bin/ravel-info, bin/ravel-conformance
#   lib/cmake/Ravel/RavelConfig.cmake (+ version file, exported targets Ravel::core, Ravel::sdk,
#                                      Ravel::reference, Ravel::validate, Ravel::lowering)
# Consumers: find_package(Ravel REQUIRED COMPONENTS core) / (... COMPONENTS sdk validate lowering).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RAVEL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ravel)
set(RAVEL_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/ravel/plugins)

# Exported names: Ravel::core, Ravel::sdk, Ravel::reference, Ravel::validate (same as the
# in-tree aliases).
set_target_properties(ravel_core PROPERTIES EXPORT_NAME core)
set_target_properties(ravel_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(ravel_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(ravel_validate PROPERTIES EXPORT_NAME validate)
set_target_properties(ravel_lowering PROPERTIES EXPORT_NAME lowering)

# The public headers are C++20: say so on the exported target, so that a consumer's
# target_link_libraries(app Ravel::core) is enough (no CMAKE_CXX_STANDARD of its own needed).
target_compile_features(ravel_core PUBLIC cxx_std_20)

# Installed executables find libravel_core.so in ../lib with no LD_LIBRARY_PATH.
set(RAVEL_INSTALLED_PROGRAMS ravel-info ravel-conformance ravel-bench makemore tour)
set_target_properties(${RAVEL_INSTALLED_PROGRAMS} PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/ ${PROJECT_SOURCE_DIR}/sdk/include/
        ${PROJECT_SOURCE_DIR}/sdk/conformance/include/ ${PROJECT_SOURCE_DIR}/sdk/validate/include/
        ${PROJECT_SOURCE_DIR}/sdk/lowering/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
install(TARGETS ravel_core ravel_sdk ravel_reference ravel_validate ravel_lowering EXPORT RavelTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ravel_backend_tbb_cpu
  LIBRARY DESTINATION ${RAVEL_INSTALL_PLUGINDIR} COMPONENT runtime)
# The GPU backends, where this machine could build them.
foreach(backend ravel_backend_hip ravel_backend_level_zero)  # OpenCL stays in the build tree (docs/opencl.md)
  if(TARGET ${backend})
    install(TARGETS ${backend} LIBRARY DESTINATION ${RAVEL_INSTALL_PLUGINDIR} COMPONENT runtime)
  endif()
endforeach()
install(TARGETS ${RAVEL_INSTALLED_PROGRAMS}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# The example configs (placement, fusion, benchmark runs) beside the documentation.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ravel/configs COMPONENT runtime)
install(EXPORT RavelTargets NAMESPACE Ravel:: FILE RavelTargets.cmake
  DESTINATION ${RAVEL_INSTALL_CMAKEDIR} COMPONENT devel)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/RavelConfig.cmake [=[
# RavelConfig.cmake: find_package(Ravel [version] REQUIRED COMPONENTS core sdk reference validate lowering)
#   Ravel::core       the runtime library (headers <ravel/ravel.hpp>); links Ravel::sdk
#   Ravel::sdk        the backend ABI headers <ravel/backend.h>, <ravel/backend.hpp> (header-only)
#   Ravel::reference  the SDK reference interpreter <ravel/conformance/reference.hpp> (static)
#   Ravel::validate   the SDK kernel validator <ravel/validate.hpp> (static, PIC; for plugins)
#   Ravel::lowering   the shared GPU lowering <ravel/lowering/...> (static, PIC; for GPU plugins)
# Also sets Ravel_PLUGIN_DIR (where an installed core looks for plugins) and
# Ravel_CONFORMANCE_EXECUTABLE (the ravel-conformance runner).
get_filename_component(_ravel_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${CMAKE_CURRENT_LIST_DIR}/RavelTargets.cmake")
set(Ravel_PLUGIN_DIR "${_ravel_prefix}/@RAVEL_INSTALL_PLUGINDIR@")
set(Ravel_CONFORMANCE_EXECUTABLE "${_ravel_prefix}/@CMAKE_INSTALL_BINDIR@/ravel-conformance")
set(Ravel_core_FOUND TRUE)
set(Ravel_sdk_FOUND TRUE)
set(Ravel_reference_FOUND TRUE)
set(Ravel_validate_FOUND TRUE)
set(Ravel_lowering_FOUND TRUE)
foreach(_ravel_comp IN LISTS Ravel_FIND_COMPONENTS)
  if(NOT Ravel_${_ravel_comp}_FOUND)
    if(Ravel_FIND_REQUIRED_${_ravel_comp})
      set(Ravel_FOUND FALSE)
      set(Ravel_NOT_FOUND_MESSAGE "Ravel has no component '${_ravel_comp}' (have: core sdk reference validate lowering)")
    endif()
  endif()
endforeach()
unset(_ravel_comp)
unset(_ravel_prefix)
]=])
file(READ ${CMAKE_CURRENT_BINARY_DIR}/RavelConfig.cmake _ravel_cfg)
string(CONFIGURE "${_ravel_cfg}" _ravel_cfg @ONLY)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/RavelConfig.cmake "${_ravel_cfg}")
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/RavelConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/RavelConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/RavelConfigVersion.cmake
        DESTINATION ${RAVEL_INSTALL_CMAKEDIR} COMPONENT devel)
