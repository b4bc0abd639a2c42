# The installable library: libsnapkv.so (C++ API of include/snapkv/ and the C API of
# snapkv/snapkv_c.h), its install rules, CMake package (find_package(snapkv) ->
# snapkv::snapkv) and pkg-config file. Included from the top-level CMakeLists.txt after the
# module libraries are defined.
#
# Composition: the shared library is made of the object files of the static module libraries
# ($<TARGET_OBJECTS:module>: every object of every module, exactly what the in-tree tests and
# the CLI link, compiled once; the modules are already position-independent) plus the C API
# sources, which are compiled into the shared library only. (Whole-archive linking of the
# modules does not work here: CMake repeats modules that others depend on in the link line,
# and each repetition is whole-archived again: duplicate symbols.) --no-undefined checks that
# the library is complete.
#
# Visibility: a version script (cmake/snapkv.map) exports the C API (snapkv_*) and namespace
# snapkv (the C++ API; internal classes in that namespace stay visible too, since public
# classes expose them and some tools use them), and hides everything else, e.g. the library's
# template instances of the standard library and fmt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The modules are those of the in-tree `snapkv` target; their external link dependencies are
# collected from them, so a new module or dependency needs no change here.
get_target_property(SNAPKV_LIB_MODULES snapkv INTERFACE_LINK_LIBRARIES)
set(_snapkv_objects)
set(_snapkv_deps)
foreach(m ${SNAPKV_LIB_MODULES})
  list(APPEND _snapkv_objects $<TARGET_OBJECTS:${m}>)
  get_target_property(_d ${m} LINK_LIBRARIES)
  list(APPEND _snapkv_deps ${_d})
endforeach()
list(REMOVE_DUPLICATES _snapkv_deps)
list(REMOVE_ITEM _snapkv_deps ${SNAPKV_LIB_MODULES})
file(GLOB SNAPKV_CAPI_SRCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/capi/*.cpp)
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
# The modules' external dependencies (fmt, OpenMP, PCRE2, ...; snapkv_flags: warnings, -march).
target_link_libraries(snapkv_shared PRIVATE ${_snapkv_deps})
target_link_options(snapkv_shared PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/snapkv.map")
if(NOT SNAPKV_SANITIZE AND NOT SNAPKV_TSAN AND NOT SNAPKV_FUZZ)
  # Every symbol resolved at link time (not with sanitizers: clang links their runtimes into
  # executables only).
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
  install(FILES ${PROJECT_SOURCE_DIR}/scripts/eval_plots.py DESTINATION ${CMAKE_INSTALL_DATADIR}/snapkv
          COMPONENT snapkv)  # the pictures of `snapkv eval`
endif()
