# kiln_cpu_table_parts(<out_var> <isa> <folder> <traits header> <traits type>
#                      [OPTIONS <flags>...] [DEFINITIONS <defs>...])
# Writes one source per matmul part of an instruction set's kernel table (backends/cpu/table_parts.h)
# into the build tree, under generated/backends/cpu/<folder>/ (x86/ for the x86 sets, which the
# ISA containment test finds by that folder), each compiled with the set's flags; appends them to
# <out_var>. The parts are the kernels' heaviest instantiations: apart, a build compiles them side by
# side and ccache keeps each one while another changes.
function(kiln_cpu_table_parts out isa folder header traits)
  cmake_parse_arguments(P "" "" "OPTIONS;DEFINITIONS" ${ARGN})
  set(srcs ${${out}})
  foreach(entry float:fill_float_matmuls w4a16:fill_w4a16_matmul a8:fill_a8_matmuls superblocks:fill_superblock_matmuls)
    string(REPLACE ":" ";" entry ${entry})
    list(GET entry 0 part)
    list(GET entry 1 template)
    set(file ${CMAKE_BINARY_DIR}/generated/backends/cpu/${folder}/${isa}_${part}.cpp)
    configure_file(${CMAKE_SOURCE_DIR}/cmake/cpu_table_part.cpp.in ${file} @ONLY)
    set_source_files_properties(${file} PROPERTIES COMPILE_OPTIONS "${P_OPTIONS}" COMPILE_DEFINITIONS "${P_DEFINITIONS}")
    list(APPEND srcs ${file})
  endforeach()
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()
