# Peer libraries for jitmm-bench (--peer onednn/openblas/libxsmm), each optional: when found, its sources get
# JITMM_HAVE_<PEER> and the bench links it; when not, the bench still builds and its table says the peer is
# "not built". Headers are SYSTEM includes (their warnings are not ours). Everything honours
# CMAKE_PREFIX_PATH, so unpacked Debian packages (the GPU machine's .devdeps) work too.
#   jitmm_bench_add_peers(<target>)
# -DJITMM_BENCH_PEERS=OFF builds the bench without any (as on a machine that lacks them).

option(JITMM_BENCH_PEERS "Link jitmm-bench with the peer libraries that are installed" ON)

function(jitmm_bench_add_peers target)
  if(NOT JITMM_BENCH_PEERS)
    message(STATUS "jitmm-bench peers: off (JITMM_BENCH_PEERS=OFF)")
    return()
  endif()
  # oneDNN (libdnnl-dev): the C++ API header and libdnnl.
  find_path(JITMM_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(JITMM_DNNL_LIBRARY dnnl)
  if(JITMM_DNNL_INCLUDE_DIR AND JITMM_DNNL_LIBRARY)
    target_include_directories(${target} SYSTEM PRIVATE ${JITMM_DNNL_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${JITMM_DNNL_LIBRARY})
    target_compile_definitions(${target} PRIVATE JITMM_HAVE_ONEDNN)
    set(have_onednn yes)
  else()
    set(have_onednn "no (libdnnl-dev)")
  endif()

  # OpenBLAS (libopenblas-dev): Debian keeps its cblas.h next to openblas_config.h under
  # <multiarch>/openblas-pthread (other variants: openblas-openmp, openblas-serial; upstream: openblas/).
  set(openblas_suffixes openblas-pthread openblas-openmp openblas-serial openblas)
  set(openblas_include_suffixes)
  foreach(s IN LISTS openblas_suffixes)
    list(APPEND openblas_include_suffixes ${CMAKE_LIBRARY_ARCHITECTURE}/${s} ${s})
  endforeach()
  find_path(JITMM_OPENBLAS_INCLUDE_DIR openblas_config.h PATH_SUFFIXES ${openblas_include_suffixes})
  find_library(JITMM_OPENBLAS_LIBRARY openblas PATH_SUFFIXES ${openblas_suffixes})
  if(JITMM_OPENBLAS_INCLUDE_DIR AND JITMM_OPENBLAS_LIBRARY AND EXISTS "${JITMM_OPENBLAS_INCLUDE_DIR}/cblas.h")
    target_include_directories(${target} SYSTEM PRIVATE ${JITMM_OPENBLAS_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${JITMM_OPENBLAS_LIBRARY})
    target_compile_definitions(${target} PRIVATE JITMM_HAVE_OPENBLAS)
    set(have_openblas yes)
  else()
    set(have_openblas "no (libopenblas-dev)")
  endif()

  # LIBXSMM (libxsmm-dev 1.17: static archives). libxsmm.a calls a BLAS for fallbacks it never takes here;
  # libxsmmnoblas.a provides those symbols, so the peer does not depend on which BLAS is installed.
  find_path(JITMM_LIBXSMM_INCLUDE_DIR libxsmm.h)
  find_library(JITMM_LIBXSMM_LIBRARY xsmm)
  find_library(JITMM_LIBXSMM_NOBLAS_LIBRARY xsmmnoblas)
  if(JITMM_LIBXSMM_INCLUDE_DIR AND JITMM_LIBXSMM_LIBRARY AND JITMM_LIBXSMM_NOBLAS_LIBRARY)
    target_include_directories(${target} SYSTEM PRIVATE ${JITMM_LIBXSMM_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${JITMM_LIBXSMM_LIBRARY} ${JITMM_LIBXSMM_NOBLAS_LIBRARY}
      Threads::Threads ${CMAKE_DL_LIBS} rt m)
    target_compile_definitions(${target} PRIVATE JITMM_HAVE_LIBXSMM)
    set(have_libxsmm yes)
  else()
    set(have_libxsmm "no (libxsmm-dev)")
  endif()

  message(STATUS "jitmm-bench peers: onednn ${have_onednn}, openblas ${have_openblas}, libxsmm ${have_libxsmm}")
endfunction()
