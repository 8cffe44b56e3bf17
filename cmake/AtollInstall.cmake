# AtollInstall.cmake — what `cmake --install` puts under the prefix:
#
#   lib/libatoll.so.0                 the library (its SONAME), unchanged: its RUNPATH still
#                                     names the Swift runtime directory, then $ORIGIN
#   lib/libatoll.so -> libatoll.so.0  for linking with -latoll
#   include/atoll.h
#   lib/pkgconfig/atoll.pc
#   lib/cmake/Atoll/AtollConfig.cmake, AtollConfigVersion.cmake   (find_package(Atoll) -> Atoll::atoll)
#   bin/atoll                         the command-line tool (SwiftPM's atoll-cli; ATOLL_BUILD_CLI)
#
# How installed programs find what they need at run time (the choice, written down):
#   - libatoll.so.0 itself: programs record an rpath to the prefix's lib directory. The .pc puts
#     -Wl,-rpath,${libdir} in Libs (ATOLL_PKGCONFIG_RPATH, default ON); CMake consumers get it
#     from CMake's own RPATH handling of the imported location (build tree), and can add
#     ${Atoll_LIBRARY_DIR} to INSTALL_RPATH for their installed programs.
#   - the Swift runtime (libswiftCore.so, Foundation...): found through libatoll.so.0's own
#     RUNPATH, which SwiftPM sets to the toolchain's runtime directory
#     (ATOLL_SWIFT_RUNTIME_DIR, e.g. /opt/swift/usr/lib/swift/linux) followed by $ORIGIN. So a
#     machine with the same toolchain in the same place needs nothing more, and nothing is
#     copied by default (the runtime with Foundation is ~80 MB).
#   - for a machine without the toolchain, -DATOLL_INSTALL_SWIFT_RUNTIME=ON copies the Swift
#     runtime libraries libatoll.so.0 (and bin/atoll) load into the same lib directory, where its
#     $ORIGIN entry finds them (the runtime libraries' own RUNPATH is $ORIGIN too).
#   - bin/atoll links the Swift modules statically, not libatoll.so.0; it needs only the Swift
#     runtime, which its RUNPATH finds in the toolchain's directory or in $ORIGIN/../lib (where
#     ATOLL_INSTALL_SWIFT_RUNTIME puts it, when the lib directory is `lib`).
# The Swift runtime cannot be linked statically into a shared library, so one of these two is
# needed; neither the .pc nor the CMake config adds an rpath to the Swift runtime, because the
# loader searches a library's RUNPATH for that library's own dependencies, not the program's.

include(CMakePackageConfigHelpers)

option(ATOLL_PKGCONFIG_RPATH "Put -Wl,-rpath,\${libdir} in atoll.pc's Libs" ON)
option(ATOLL_INSTALL_SWIFT_RUNTIME "Install the Swift runtime libraries libatoll needs next to it" OFF)

set(_atoll_exec_permissions OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
    WORLD_READ WORLD_EXECUTE)

install(FILES "${ATOLL_STAGED_LIBRARY}"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        PERMISSIONS ${_atoll_exec_permissions})
# A symlink is installed as a symlink.
install(FILES "${ATOLL_STAGE_DIR}/libatoll.so" DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/include/atoll.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
if(ATOLL_BUILD_CLI)
    install(PROGRAMS "${ATOLL_STAGED_CLI}" DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()

# pkg-config. libatoll.so is linked against jansson and sqlite3 itself (DT_NEEDED), so a host
# needs neither on its link line; Libs.private names them for completeness (there is no static
# libatoll). A host that uses the _j functions includes <jansson.h> and links jansson itself.
if(ATOLL_PKGCONFIG_RPATH)
    set(ATOLL_PC_RPATH "-Wl,-rpath,\${libdir} ")
else()
    set(ATOLL_PC_RPATH "")
endif()
# The prefix is only known at install time (`cmake --install --prefix` may change it), so the
# .pc is written then: everything else is filled in now, @ATOLL_PC_PREFIX@ at install time.
set(ATOLL_PC_PREFIX "@ATOLL_PC_PREFIX@")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(ATOLL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
    set(ATOLL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(ATOLL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
    set(ATOLL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/atoll.pc.in" "${CMAKE_BINARY_DIR}/atoll.pc.in" @ONLY)
install(CODE "
    set(ATOLL_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${CMAKE_BINARY_DIR}/atoll.pc.in\" \"${CMAKE_BINARY_DIR}/pkgconfig/atoll.pc\" @ONLY)
")
install(FILES "${CMAKE_BINARY_DIR}/pkgconfig/atoll.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# CMake package.
set(ATOLL_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/Atoll")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/AtollConfig.cmake.in"
    "${CMAKE_BINARY_DIR}/AtollConfig.cmake"
    INSTALL_DESTINATION "${ATOLL_CMAKE_INSTALL_DIR}"
    PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# Same major version: the SONAME is libatoll.so.0, and within it signatures never change.
write_basic_package_version_file("${CMAKE_BINARY_DIR}/AtollConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMajorVersion)
install(FILES "${CMAKE_BINARY_DIR}/AtollConfig.cmake" "${CMAKE_BINARY_DIR}/AtollConfigVersion.cmake"
        DESTINATION "${ATOLL_CMAKE_INSTALL_DIR}")

if(ATOLL_INSTALL_SWIFT_RUNTIME)
    if(NOT ATOLL_SWIFT_RUNTIME_DIR)
        message(FATAL_ERROR "ATOLL_INSTALL_SWIFT_RUNTIME needs ATOLL_SWIFT_RUNTIME_DIR (swift -print-target-info)")
    endif()
    set(_atoll_cli_for_runtime "")
    if(ATOLL_BUILD_CLI)
        set(_atoll_cli_for_runtime "EXECUTABLES \"${ATOLL_STAGED_CLI}\"")
    endif()
    # At install time: the libraries the loader resolves for libatoll.so.0 (and bin/atoll) from
    # the runtime dir.
    install(CODE "
        file(GET_RUNTIME_DEPENDENCIES
             LIBRARIES \"${ATOLL_STAGED_LIBRARY}\"
             ${_atoll_cli_for_runtime}
             RESOLVED_DEPENDENCIES_VAR _atoll_deps
             UNRESOLVED_DEPENDENCIES_VAR _atoll_unresolved
             DIRECTORIES \"${ATOLL_SWIFT_RUNTIME_DIR}\")
        foreach(_dep IN LISTS _atoll_deps)
            file(REAL_PATH \"\${_dep}\" _real)
            if(_real MATCHES \"^${ATOLL_SWIFT_RUNTIME_DIR}/\")
                file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\"
                     TYPE SHARED_LIBRARY FILES \"\${_dep}\")
            endif()
        endforeach()
    ")
endif()
