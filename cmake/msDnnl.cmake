# Finds oneDNN (Debian: libdnnl-dev) for ms: sets MS_DNNL_FOUND and makes the imported
# target ms_dnnl (headers and libdnnl). Debian's own dnnl CMake package asks for OpenCL
# headers (it was built with the OpenCL GPU runtime) that ms never uses, so ms looks for
# the CPU library and its C header directly. Shared by CMakeLists.txt and msConfig.cmake.
find_path(MS_DNNL_INCLUDE_DIR dnnl.h PATH_SUFFIXES oneapi/dnnl)
find_library(MS_DNNL_LIBRARY NAMES dnnl)
mark_as_advanced(MS_DNNL_INCLUDE_DIR MS_DNNL_LIBRARY)
if(MS_DNNL_INCLUDE_DIR AND MS_DNNL_LIBRARY)
  set(MS_DNNL_FOUND ON)
  if(NOT TARGET ms_dnnl)
    add_library(ms_dnnl UNKNOWN IMPORTED)
    set_target_properties(ms_dnnl PROPERTIES
      IMPORTED_LOCATION "${MS_DNNL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${MS_DNNL_INCLUDE_DIR}")
  endif()
else()
  set(MS_DNNL_FOUND OFF)
endif()
