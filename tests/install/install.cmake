# cmake -DBUILD_DIR=<build> -DPREFIX=<prefix> -P install.cmake: installs the build into a fresh
# PREFIX (nothing left over from an earlier install), then checks that every quoted #include of
# an installed header names an installed file (from the include directory or beside the
# header), so no public header reaches into a folder that is not installed (a kernel's cpu/
# helpers, another internal header).
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
  OUTPUT_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${status})")
endif()
foreach(file purineConfig.cmake purineConfigVersion.cmake purineTargets.cmake)
  file(GLOB_RECURSE found ${PREFIX}/*/${file})
  if(NOT found)
    message(FATAL_ERROR "the install lacks ${file}")
  endif()
endforeach()

file(GLOB_RECURSE headers RELATIVE ${PREFIX}/include ${PREFIX}/include/*.hpp)
list(LENGTH headers count)
if(count EQUAL 0 OR NOT EXISTS ${PREFIX}/include/purine.pb.h)
  message(FATAL_ERROR "no headers or no purine.pb.h under ${PREFIX}/include")
endif()
set(missing "")
foreach(header ${headers})
  file(STRINGS ${PREFIX}/include/${header} includes REGEX "^#include \"")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    get_filename_component(beside ${header} DIRECTORY)
    if(NOT EXISTS ${PREFIX}/include/${included} AND NOT EXISTS ${PREFIX}/include/${beside}/${included})
      string(APPEND missing "\n  ${header} includes ${included}")
    endif()
  endforeach()
endforeach()
if(missing)
  message(FATAL_ERROR "installed headers include files that are not installed:${missing}")
endif()
message(STATUS "installed ${count} headers, libpurine and the CMake package into ${PREFIX}")
