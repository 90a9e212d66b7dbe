# What `cmake --install` puts where, the CMake package and pkg-config file that let a program of
# one's own use the libraries, and the Debian packages `cpack -G DEB` makes (docs/install.md).
#
#   PREFIX/bin/scratchformer                          the program                      runtime
#   PREFIX/share/scratchformer/configs, data/corpora  its configs and shipped corpora  runtime
#   PREFIX/share/scratchformer/gdb                    the gdb pretty-printers          runtime
#   PREFIX/share/doc/scratchformer                    README, docs                     runtime
#   PREFIX/include/scratchformer/autograd/...         the headers, as included today   dev
#   PREFIX/LIBDIR/libscratchformer_*.a                the libraries                    dev
#   PREFIX/LIBDIR/cmake/Scratchformer                 find_package(Scratchformer)      dev
#   PREFIX/LIBDIR/pkgconfig/scratchformer.pc          pkg-config scratchformer         dev
#   PREFIX/share/doc/scratchformer/examples           examples/, each its own project  dev
#
# The program finds its configs and corpora at run time from where it lies (train/data_folder.h):
# share/scratchformer/ beside its bin/, or the checkout it was built in. No path is compiled in.
include(CMakePackageConfigHelpers)

set(SF_DATA_DIR ${CMAKE_INSTALL_DATADIR}/scratchformer)
set(SF_DOC_DIR ${CMAKE_INSTALL_DOCDIR})  # share/doc/scratchformer
set(SF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Scratchformer)

# ---- runtime: the program and what it reads ----
install(TARGETS scratchformer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY configs DESTINATION ${SF_DATA_DIR} COMPONENT runtime FILES_MATCHING PATTERN "*.toml")
install(DIRECTORY data/corpora DESTINATION ${SF_DATA_DIR}/data COMPONENT runtime)
install(FILES tools/gdb/scratchformer_printers.py DESTINATION ${SF_DATA_DIR}/gdb COMPONENT runtime)
install(FILES README.md README.zh-CN.md DESTINATION ${SF_DOC_DIR} COMPONENT runtime)
install(DIRECTORY docs/ DESTINATION ${SF_DOC_DIR}/docs COMPONENT runtime)

# ---- dev: libraries, headers, the CMake package, pkg-config ----
get_property(SF_LIBRARIES GLOBAL PROPERTY SCRATCHFORMER_LIBRARIES)
install(TARGETS ${SF_LIBRARIES} EXPORT ScratchformerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
foreach(folder autograd nn data train)
  install(DIRECTORY ${folder} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/scratchformer COMPONENT dev
    FILES_MATCHING PATTERN "*.h" PATTERN "corpora" EXCLUDE PATTERN "web" EXCLUDE)
endforeach()
install(EXPORT ScratchformerTargets NAMESPACE Scratchformer:: DESTINATION ${SF_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/ScratchformerConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ScratchformerConfig.cmake
  INSTALL_DESTINATION ${SF_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ScratchformerConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ScratchformerConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ScratchformerConfigVersion.cmake
  DESTINATION ${SF_CMAKE_DIR} COMPONENT dev)
install(DIRECTORY examples/ DESTINATION ${SF_DOC_DIR}/examples COMPONENT dev PATTERN "build" EXCLUDE)

# scratchformer.pc: the core libraries (classroom and below) for a Makefile or a plain g++ line.
# The prefix is found from the file's own folder, so an installed tree can be moved.
file(RELATIVE_PATH SF_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
set(SF_PC_REQUIRES "openblas sentencepiece nlohmann_json")
set(SF_PC_CFLAGS "-std=c++20 -fopenmp")
if(SCRATCHFORMER_MPI)
  string(APPEND SF_PC_REQUIRES " ompi-c")  # libmpi: distributed.cpp calls the C API
endif()
if(SCRATCHFORMER_REFERENCE)
  string(APPEND SF_PC_CFLAGS " -DSCRATCHFORMER_REFERENCE=1 -Wno-unknown-pragmas")
endif()
if(SCRATCHFORMER_SINGLE_THREAD)
  string(APPEND SF_PC_CFLAGS " -DSCRATCHFORMER_SINGLE_THREAD=1")
endif()
configure_file(cmake/scratchformer.pc.in ${CMAKE_CURRENT_BINARY_DIR}/scratchformer.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/scratchformer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- cpack -G DEB: two packages, as Debian splits a library ----
#   scratchformer         the program, configs, corpora, docs; Depends from dpkg-shlibdeps
#   libscratchformer-dev  headers, libraries, CMake package; Depends on the -dev packages it needs
set(CPACK_PACKAGE_NAME scratchformer)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "From-scratch C++ Transformer framework for teaching")
set(CPACK_PACKAGE_CONTACT "Scratchformer maintainers <scratchformer@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME scratchformer)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "fonts-wqy-microhei, gdb")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libscratchformer-dev)
set(SF_DEV_DEPENDS "scratchformer (= ${PROJECT_VERSION}), g++, cmake, pkg-config, libopenblas-dev, libsentencepiece-dev, libdnnl-dev, ocl-icd-opencl-dev, nlohmann-json3-dev, libcpp-httplib-dev")
if(SCRATCHFORMER_MPI)
  string(APPEND SF_DEV_DEPENDS ", libopenmpi-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${SF_DEV_DEPENDS}")
# The first line is the package's one-line synopsis, the rest its long description.
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "From-scratch C++ Transformer framework for teaching: the program
Trains and explores the encoder-decoder Transformer of a course on attention:
training from a config, translation, the lecture's demos, gradient checks and
the explorer in the browser. Configs and two parallel corpora (Multi30k de-en,
Tatoeba zh-en) in /usr/share/scratchformer.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "From-scratch C++ Transformer framework for teaching: libraries and headers
The autograd, nn, data and train libraries with their headers,
find_package(Scratchformer) and pkg-config scratchformer, and the example
projects in /usr/share/doc/scratchformer/examples.")
include(CPack)
