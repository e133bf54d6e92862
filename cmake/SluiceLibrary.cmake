# SPDX-License-Identifier: MIT
# sluice_add_library(NAME EXPORT_NAME SOURCES... [SHARED_SOURCES...] [PUBLIC_LINK deps...]
#                    [SHARED_LINK deps...])
#
# Builds one library twice from the same sources: NAME, static (what sluice's own binaries and
# tests link, so they run from the build tree without any library path), and NAME_shared, a
# shared library with the same output name and a SONAME of the major version. Both are
# installed and exported: find_package(sluice) gives sluice::EXPORT_NAME (shared) and
# sluice::EXPORT_NAME_static. The shared libraries find each other in their own directory
# (RUNPATH $ORIGIN), wherever the install is moved.
#
# Both are built with hidden visibility: a shared library exports exactly the declarations of
# the installed headers marked SLUICE_API (sluice/export.h), and tests/install/check.sh holds it
# to that. SHARED_SOURCES go into the shared library only (the internal helpers it needs from
# libsluice, which the static one finds in libsluice.a).
function(sluice_add_library name export_name)
    cmake_parse_arguments(ARG "" "" "SOURCES;SHARED_SOURCES;PUBLIC_LINK;SHARED_LINK;INCLUDE_DIRS" ${ARGN})
    foreach(kind STATIC SHARED)
        if(kind STREQUAL STATIC)
            set(target ${name})
            set(exported ${export_name}_static)
            set(links ${ARG_PUBLIC_LINK})
            set(sources ${ARG_SOURCES})
        else()
            set(target ${name}_shared)
            set(exported ${export_name})
            set(links ${ARG_SHARED_LINK})
            set(sources ${ARG_SOURCES} ${ARG_SHARED_SOURCES})
        endif()
        add_library(${target} ${kind} ${sources})
        target_include_directories(${target}
            PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
            PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src ${ARG_INCLUDE_DIRS})
        target_link_libraries(${target} PUBLIC ${links} PRIVATE $<BUILD_INTERFACE:sluice_warnings>)
        set_target_properties(${target} PROPERTIES
            OUTPUT_NAME ${name}
            EXPORT_NAME ${exported}
            POSITION_INDEPENDENT_CODE ON
            VERSION ${PROJECT_VERSION}
            SOVERSION ${PROJECT_VERSION_MAJOR}
            C_VISIBILITY_PRESET hidden)
        if(kind STREQUAL SHARED)
            set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
        endif()
        install(TARGETS ${target} EXPORT sluiceTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    endforeach()
endfunction()
