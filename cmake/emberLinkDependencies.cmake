# The link-only dependencies of a static ember (installed with emberConfig.cmake; see Note
# [Private dependencies] in ember's top-level CMakeLists.txt): no ember header includes theirs,
# but a program linking static ember libraries needs them at link time. Each becomes an
# imported target named as emberTargets.cmake refers to it, found by library name on the
# consumer's machine (no path of the build machine). Sets ember_NOT_FOUND_MESSAGE when one is
# missing.

# _ember_link_dependency(target library what [hint-dir...])
macro(_ember_link_dependency target library what)
  if(NOT TARGET ${target} AND NOT ember_NOT_FOUND_MESSAGE)
    find_library(EMBER_LINK_${library}_LIBRARY NAMES ${library} HINTS ${ARGN})
    if(EMBER_LINK_${library}_LIBRARY)
      add_library(${target} UNKNOWN IMPORTED)
      set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${EMBER_LINK_${library}_LIBRARY}")
    else()
      set(ember_NOT_FOUND_MESSAGE "ember (static libraries) needs ${what} (lib${library}) to link")
    endif()
  endif()
endmacro()

_ember_link_dependency(ember_deps::openblas openblas "the OpenBLAS library")
if(EMBER_HAVE_MPI)
  _ember_link_dependency(ember_deps::mpi mpi "the MPI library of its mpi backend")
endif()
if(EMBER_HAVE_CUDNN)
  _ember_link_dependency(ember_deps::cudnn cudnn "the cuDNN library of its GPU RNN" ${CUDAToolkit_LIBRARY_DIR})
endif()
if(EMBER_HAVE_NCCL)
  _ember_link_dependency(ember_deps::nccl nccl "the NCCL library of its nccl backend" ${CUDAToolkit_LIBRARY_DIR})
endif()
