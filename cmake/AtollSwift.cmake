# AtollSwift.cmake — builds libatoll.so with SwiftPM and exposes it as Atoll::atoll; builds the
# `atoll` command-line tool.
#
# Cache variables:
#   ATOLL_SWIFT_CONFIG   release (default) or debug: the `swift build -c` configuration.
#   ATOLL_LIBRARY        an existing libatoll.so to use instead of running swift build.
#   ATOLL_BUILD_CLI      ON (default): build the atoll command (needs swift even with ATOLL_LIBRARY).
#   SWIFT_EXECUTABLE     the swift driver.
# Defines:
#   atoll_swift                  custom target (in ALL): swift build, then stages the library.
#   Atoll::atoll                 IMPORTED shared library; depending on it runs atoll_swift first.
#   ATOLL_STAGED_LIBRARY         <build>/lib/libatoll.so.0 (with a libatoll.so symlink beside it).
#   ATOLL_SWIFT_RUNTIME_DIR      the Swift runtime library directory of the toolchain.
#   atoll_cli                    custom target (in ALL, with ATOLL_BUILD_CLI): swift build --product
#                                atoll-cli, then stages it as ATOLL_STAGED_CLI.
#   ATOLL_STAGED_CLI             <build>/bin/atoll: the tool under the name it is installed as.
#
# Why a staged copy: the library's SONAME is libatoll.so.0, so a program linked against it asks
# the loader for "libatoll.so.0". SwiftPM writes only .build/<config>/libatoll.so; the copy in
# <build>/lib gives the loader a file of that name, and CMake's build-tree RPATH points there.

set(ATOLL_SWIFT_CONFIG "release" CACHE STRING "swift build configuration for libatoll (release or debug)")
set_property(CACHE ATOLL_SWIFT_CONFIG PROPERTY STRINGS release debug)
if(NOT ATOLL_SWIFT_CONFIG MATCHES "^(release|debug)$")
    message(FATAL_ERROR "ATOLL_SWIFT_CONFIG must be release or debug, not '${ATOLL_SWIFT_CONFIG}'")
endif()
set(ATOLL_LIBRARY "" CACHE FILEPATH "A prebuilt libatoll.so to use instead of building one with swift build")

find_program(SWIFT_EXECUTABLE swift)

# The toolchain's runtime directory (libswiftCore.so...): libatoll.so's RUNPATH names it.
if(SWIFT_EXECUTABLE AND NOT ATOLL_SWIFT_RUNTIME_DIR)
    execute_process(COMMAND "${SWIFT_EXECUTABLE}" -print-target-info
                    OUTPUT_VARIABLE _atoll_target_info RESULT_VARIABLE _atoll_rc ERROR_QUIET)
    if(_atoll_rc EQUAL 0)
        string(JSON _atoll_runtime_dir ERROR_VARIABLE _atoll_json_error
               GET "${_atoll_target_info}" paths runtimeLibraryPaths 0)
        if(NOT _atoll_json_error)
            set(ATOLL_SWIFT_RUNTIME_DIR "${_atoll_runtime_dir}" CACHE PATH
                "The Swift runtime library directory (from swift -print-target-info)")
        endif()
    endif()
endif()

set(ATOLL_STAGE_DIR "${CMAKE_BINARY_DIR}/lib")
set(ATOLL_STAGED_LIBRARY "${ATOLL_STAGE_DIR}/libatoll.so.0")
set(_atoll_stage_commands
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${ATOLL_STAGE_DIR}"
    COMMAND "${CMAKE_COMMAND}" -E copy_if_different "<SOURCE>" "${ATOLL_STAGED_LIBRARY}"
    COMMAND "${CMAKE_COMMAND}" -E create_symlink libatoll.so.0 "${ATOLL_STAGE_DIR}/libatoll.so")

if(ATOLL_LIBRARY)
    set(ATOLL_BUILT_LIBRARY "${ATOLL_LIBRARY}")
    string(REPLACE "<SOURCE>" "${ATOLL_BUILT_LIBRARY}" _atoll_stage_commands "${_atoll_stage_commands}")
    add_custom_target(atoll_swift ALL
        ${_atoll_stage_commands}
        BYPRODUCTS "${ATOLL_STAGED_LIBRARY}" "${ATOLL_STAGE_DIR}/libatoll.so"
        COMMENT "Staging the prebuilt ${ATOLL_LIBRARY}"
        VERBATIM)
else()
    if(NOT SWIFT_EXECUTABLE)
        message(FATAL_ERROR "swift not found: install a Swift toolchain, or set ATOLL_LIBRARY to a prebuilt libatoll.so")
    endif()
    set(ATOLL_BUILT_LIBRARY "${PROJECT_SOURCE_DIR}/.build/${ATOLL_SWIFT_CONFIG}/libatoll.so")
    string(REPLACE "<SOURCE>" "${ATOLL_BUILT_LIBRARY}" _atoll_stage_commands "${_atoll_stage_commands}")
    # No OUTPUT tracking on purpose: SwiftPM knows what is up to date (a no-op build takes a
    # fraction of a second), and copy_if_different leaves the staged file alone when nothing
    # changed, so nothing relinks.
    add_custom_target(atoll_swift ALL
        COMMAND "${SWIFT_EXECUTABLE}" build -c "${ATOLL_SWIFT_CONFIG}" --product atoll
                --package-path "${PROJECT_SOURCE_DIR}"
        ${_atoll_stage_commands}
        BYPRODUCTS "${ATOLL_STAGED_LIBRARY}" "${ATOLL_STAGE_DIR}/libatoll.so"
        WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
        COMMENT "swift build -c ${ATOLL_SWIFT_CONFIG} --product atoll"
        USES_TERMINAL
        VERBATIM)
endif()

add_library(Atoll::atoll SHARED IMPORTED GLOBAL)
set_target_properties(Atoll::atoll PROPERTIES
    IMPORTED_LOCATION "${ATOLL_STAGED_LIBRARY}"
    IMPORTED_SONAME "libatoll.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${PROJECT_SOURCE_DIR}/include")
# Dependencies added to an imported target are followed by everything that links it.
add_dependencies(Atoll::atoll atoll_swift)

# The atoll command. SwiftPM names it atoll-cli (its product name cannot be atoll, the library's);
# the staged copy, and the installed one, are named atoll.
option(ATOLL_BUILD_CLI "Build the atoll command-line tool and install it as bin/atoll" ON)
if(ATOLL_BUILD_CLI)
    if(NOT SWIFT_EXECUTABLE)
        message(FATAL_ERROR "swift not found: the atoll command is built with swift; install a Swift toolchain or set -DATOLL_BUILD_CLI=OFF")
    endif()
    set(ATOLL_STAGED_CLI "${CMAKE_BINARY_DIR}/bin/atoll")
    add_custom_target(atoll_cli ALL
        COMMAND "${SWIFT_EXECUTABLE}" build -c "${ATOLL_SWIFT_CONFIG}" --product atoll-cli
                --package-path "${PROJECT_SOURCE_DIR}"
        COMMAND "${CMAKE_COMMAND}" -E make_directory "${CMAKE_BINARY_DIR}/bin"
        COMMAND "${CMAKE_COMMAND}" -E copy_if_different
                "${PROJECT_SOURCE_DIR}/.build/${ATOLL_SWIFT_CONFIG}/atoll-cli" "${ATOLL_STAGED_CLI}"
        BYPRODUCTS "${ATOLL_STAGED_CLI}"
        WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
        COMMENT "swift build -c ${ATOLL_SWIFT_CONFIG} --product atoll-cli, staged as bin/atoll"
        USES_TERMINAL
        VERBATIM)
    # One swift build at a time in the package (SwiftPM locks .build).
    add_dependencies(atoll_cli atoll_swift)
endif()
