# Install-time step of Note [Installed headers] (cmake/EmberInstall.cmake): copies the public
# headers of core, autograd, nn, data, parallel, tensorboard and profiler, ember/ember.h and the generated
# core/config.h to EMBER_HEADERS_DESTINATION/ember/, with their project-internal includes
# ("core/x.h") rewritten to "ember/core/x.h". Headers that include a private dependency are
# left out, and so are those that include them. Inputs (set by the caller): EMBER_HEADERS_SOURCE_DIR, EMBER_HEADERS_CONFIG_H,
# EMBER_HEADERS_STAGING_DIR (a folder of the build tree), EMBER_HEADERS_DESTINATION.
# With EMBER_HEADERS_LIST_FILE set instead (cmake -P, only EMBER_HEADERS_SOURCE_DIR needed) it
# installs nothing and writes the public headers' source paths there, one a line: the API
# reference's input (scripts/api_docs.sh).
cmake_policy(PUSH)
cmake_policy(VERSION 3.25)  # script mode and install(CODE) start without policies (IN_LIST)
set(_folders core autograd nn data parallel tensorboard profiler)
set(_globs "")
foreach(_f IN LISTS _folders)
  list(APPEND _globs "${EMBER_HEADERS_SOURCE_DIR}/${_f}/*.h")
endforeach()
file(GLOB_RECURSE _headers RELATIVE "${EMBER_HEADERS_SOURCE_DIR}" ${_globs})
list(APPEND _headers ember/ember.h)
list(JOIN _folders "|" _alternatives)

# Left out: a header that includes a private dependency's header (or CUDA's: those are the
# device code's own, see core/cuda/), and, until nothing changes, a header that includes a
# header left out.
set(_private "#include <(boost/|nlohmann/|CLI/|mpi\\.h>|nccl\\.h>|cuda[a-z_]*\\.h>|cublas[a-z_0-9]*\\.h>|cudnn\\.h>)")
set(_left_out "")
foreach(_h IN LISTS _headers)
  file(READ "${EMBER_HEADERS_SOURCE_DIR}/${_h}" _text)
  if(_text MATCHES "${_private}")
    list(APPEND _left_out "${_h}")
  endif()
endforeach()
set(_changed TRUE)
while(_changed)
  set(_changed FALSE)
  foreach(_h IN LISTS _headers)
    if(_h IN_LIST _left_out)
      continue()
    endif()
    file(STRINGS "${EMBER_HEADERS_SOURCE_DIR}/${_h}" _includes REGEX "^#include \"")
    foreach(_line IN LISTS _includes)
      if(_line MATCHES "^#include \"([^\"]+)\"" AND CMAKE_MATCH_1 IN_LIST _left_out)
        list(APPEND _left_out "${_h}")
        set(_changed TRUE)
        break()
      endif()
    endforeach()
  endforeach()
endwhile()

if(EMBER_HEADERS_LIST_FILE)
  set(_public "${_headers}")
  list(REMOVE_ITEM _public ${_left_out})
  list(SORT _public)
  list(JOIN _public "\n" _public)
  file(WRITE "${EMBER_HEADERS_LIST_FILE}" "${_public}\n")
  cmake_policy(POP)
  return()
endif()

foreach(_h IN LISTS _headers)
  if(_h IN_LIST _left_out)
    continue()
  endif()
  set(_rel "${_h}")
  if(_h STREQUAL "ember/ember.h")
    set(_rel "ember.h")
  endif()
  file(READ "${EMBER_HEADERS_SOURCE_DIR}/${_h}" _text)
  string(REGEX REPLACE "#include \"(${_alternatives})/" "#include \"ember/\\1/" _text "${_text}")
  set(_staged "${EMBER_HEADERS_STAGING_DIR}/ember/${_rel}")
  set(_old "")
  if(EXISTS "${_staged}")
    file(READ "${_staged}" _old)
  endif()
  if(NOT _old STREQUAL _text)  # keep the time stamp of an unchanged header
    file(WRITE "${_staged}" "${_text}")
  endif()
  get_filename_component(_dir "${EMBER_HEADERS_DESTINATION}/ember/${_rel}" DIRECTORY)
  file(INSTALL DESTINATION "${_dir}" TYPE FILE FILES "${_staged}")
endforeach()
file(INSTALL DESTINATION "${EMBER_HEADERS_DESTINATION}/ember/core" TYPE FILE FILES "${EMBER_HEADERS_CONFIG_H}")
cmake_policy(POP)
