# The installable library: libsnapkv.so (C++ API of include/snapkv/ and the C API of
# snapkv/snapkv_c.h), its install rules, CMake package (find_package(snapkv) ->
# snapkv::snapkv) and pkg-config file. Included from the top-level CMakeLists.txt after the
# module libraries are defined.
#
# Composition: the shared library links the static module libraries whole-archive
# ($<LINK_LIBRARY:WHOLE_ARCHIVE,...>), so every object of every module is in it exactly as
# the in-tree tests and the CLI see it, without compiling anything twice (the modules are
# already position-independent). The C API sources are compiled into the shared library only.
#
# Visibility: a version script (cmake/snapkv.map) exports the C API (snapkv_*) and namespace
# snapkv (the C++ API; internal classes in that namespace stay visible too, since public
# classes expose them and some tools use them), and hides everything else, e.g. the library's
# template instances of the standard library and fmt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SNAPKV_LIB_MODULES snapkv_core snapkv_gguf snapkv_quant snapkv_tokenizer snapkv_press snapkv_engine)
file(GLOB SNAPKV_CAPI_SRCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/capi/*.cpp)

set(_snapkv_objects)
foreach(m ${SNAPKV_LIB_MODULES})
  list(APPEND _snapkv_objects $<TARGET_OBJECTS:${m}>)
endforeach()
add_library(snapkv_shared SHARED ${SNAPKV_CAPI_SRCS} ${_snapkv_objects})
set_target_properties(snapkv_shared PROPERTIES
  OUTPUT_NAME snapkv
  EXPORT_NAME snapkv
  VERSION ${PROJECT_VERSION}
  # 0.x: any minor release may change the ABI, so the SONAME carries MAJOR.MINOR.
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/snapkv.map)
target_compile_definitions(snapkv_shared PRIVATE SNAPKV_VERSION_STRING="${PROJECT_VERSION}")
target_include_directories(snapkv_shared
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_features(snapkv_shared PUBLIC cxx_std_20)
# The modules' external dependencies (--no-undefined below catches one missing here).
target_link_libraries(snapkv_shared PRIVATE snapkv_flags fmt::fmt OpenMP::OpenMP_CXX PkgConfig::PCRE2
  nlohmann_json::nlohmann_json)
target_link_options(snapkv_shared PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/snapkv.map")
if(NOT SNAPKV_SANITIZE AND NOT SNAPKV_FUZZ)
  # Every symbol resolved at link time (sanitizer runtimes are only linked into executables).
  target_link_options(snapkv_shared PRIVATE "LINKER:--no-undefined")
endif()

# ---- install ------------------------------------------------------------------------------
install(TARGETS snapkv_shared EXPORT snapkvTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT snapkv)
# The public headers only (include/snapkv/*.h), never the internal ones under src/.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/snapkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT snapkv FILES_MATCHING PATTERN "*.h")

set(SNAPKV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/snapkv)
install(EXPORT snapkvTargets NAMESPACE snapkv:: DESTINATION ${SNAPKV_CMAKE_DIR} COMPONENT snapkv)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/snapkvConfig.cmake.in
  ${PROJECT_BINARY_DIR}/snapkvConfig.cmake INSTALL_DESTINATION ${SNAPKV_CMAKE_DIR})
# 0.x: only the same MAJOR.MINOR is compatible (as the SONAME).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/snapkvConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/snapkvConfig.cmake ${PROJECT_BINARY_DIR}/snapkvConfigVersion.cmake
  DESTINATION ${SNAPKV_CMAKE_DIR} COMPONENT snapkv)

# pkg-config: prefix relative to the .pc file (${pcfiledir}), so the installed tree relocates
# (absolute CMAKE_INSTALL_LIBDIR / INCLUDEDIR are written as they are).
file(RELATIVE_PATH SNAPKV_PC_PREFIX_FROM_PCDIR /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" SNAPKV_PC_PREFIX_FROM_PCDIR "${SNAPKV_PC_PREFIX_FROM_PCDIR}")
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(SNAPKV_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(SNAPKV_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/snapkv.pc.in ${PROJECT_BINARY_DIR}/snapkv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/snapkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT snapkv)

# The command-line tool, next to the library.
if(TARGET snapkv_cli)
  install(TARGETS snapkv_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT snapkv)
endif()
