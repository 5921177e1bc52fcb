# Installation: `cmake --install build --prefix P` puts libpurine.so under P/lib, the headers of
# PURINE_HEADER_DIRS under P/include with their source-tree paths ("base/tensor.hpp",
# "operators/operator.hpp"), the generated purine.pb.h beside them, and the CMake package under
# P/lib/cmake/purine, so that another project builds with
#   find_package(purine REQUIRED)
#   target_link_libraries(app PRIVATE purine::purine)
# (examples/skip_connection does, configured against an install by the test suite).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The interface of the installed target: C++17, the include directory, and what the public
# headers use (purine/serialize.hpp includes purine.pb.h; the dispatcher's headers std::thread).
# The rest of what libpurine.so links (glog, Open MPI, OpenBLAS, oneDNN, OpenMP, zlib) is
# private to the shared library: its DT_NEEDED entries and RUNPATH find them at run time.
target_compile_features(purine INTERFACE cxx_std_17)
target_include_directories(purine INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(purine PUBLIC protobuf::libprotobuf Threads::Threads)
# The installed library keeps the link directories outside the system's (OpenBLAS's pthread
# variant, Open MPI) in its RUNPATH, as the build tree's does.
set_target_properties(purine PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
# libpurine.so.0.1 with SONAME libpurine.so.0.1: before 1.0 a minor version may break the ABI,
# so a program stays bound to the minor version it was linked against.
set_target_properties(purine PROPERTIES VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

# A folder's public headers are the ones at its top; its subfolders (X/internal/, the operators'
# cpu/, cuda/ and mpi/) hold internals and are not installed (tools/check_layering.sh keeps every
# other folder from including them; tests/install checks that none is installed or included by an
# installed header, and compiles each installed header on its own).
foreach(dir ${PURINE_HEADER_DIRS})
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.hpp)
  install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir})
endforeach()
install(FILES ${PURINE_PROTO_HDRS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS purine EXPORT purineTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The CUDA backend beside libpurine.so, where libpurine.so looks for it; its RUNPATH keeps the
# CUDA libraries' folders.
if(TARGET purine_cuda_backend)
  set_target_properties(purine_cuda_backend PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS purine_cuda_backend LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/purine)
install(EXPORT purineTargets NAMESPACE purine:: DESTINATION ${config_dir})
configure_package_config_file(cmake/purineConfig.cmake.in
  ${PROJECT_BINARY_DIR}/purineConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/purineConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/purineConfig.cmake
  ${PROJECT_BINARY_DIR}/purineConfigVersion.cmake DESTINATION ${config_dir})
