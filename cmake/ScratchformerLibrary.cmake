# scratchformer_library(TARGET EXPORT_NAME): what makes one of the project's libraries installable.
#
# Inside the build its headers are included from the source tree as "autograd/tensor.h"; once
# installed, the same lines find them under PREFIX/include/scratchformer/. The archive is named
# libscratchformer_EXPORT_NAME.a (a lab machine's /usr/lib has room for one libnn.a only), and the
# target is exported as Scratchformer::EXPORT_NAME (ScratchformerConfig.cmake, cmake/install.cmake).
set_property(GLOBAL PROPERTY SCRATCHFORMER_LIBRARIES "")

function(scratchformer_library target export_name)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/scratchformer>)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name} OUTPUT_NAME scratchformer_${export_name})
  set_property(GLOBAL APPEND PROPERTY SCRATCHFORMER_LIBRARIES ${target})
endfunction()
