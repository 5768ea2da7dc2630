# The layering, checked: each folder of src/ may include the headers of its own folder and of the
# folders whose targets its target links (directly or through others), nothing else. The links
# are read from the targets themselves, so CMakeLists.txt stays the one place the layers are
# written down; the test Layers.IncludesFollowTheLinks (cmake/check_layers.cmake) scans the
# sources against what this writes.

# Every kiln_* target a target reaches through its links.
function(kiln_link_closure target out)
  set(seen "")
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${t} INTERFACE_LINK_LIBRARIES)
    else()
      get_target_property(links ${t} LINK_LIBRARIES)
    endif()
    foreach(l IN LISTS links)
      if(l MATCHES "^kiln_")
        list(APPEND todo ${l})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

get_property(kiln_folder_map GLOBAL PROPERTY KILN_FOLDERS)
set(kiln_layers_text "")
foreach(entry IN LISTS kiln_folder_map)
  string(REPLACE "=" ";" pair "${entry}")
  list(GET pair 0 dir)
  list(GET pair 1 target)
  kiln_link_closure(${target} reach)
  set(allowed "")
  foreach(other IN LISTS kiln_folder_map)
    string(REPLACE "=" ";" opair "${other}")
    list(GET opair 0 odir)
    list(GET opair 1 otarget)
    if(otarget IN_LIST reach)
      list(APPEND allowed ${odir})
    endif()
  endforeach()
  string(REPLACE ";" " " allowed "${allowed}")
  string(APPEND kiln_layers_text "${dir}: ${allowed}\n")
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/kiln_layers.txt "${kiln_layers_text}")

# tools/ (the kiln CLI) is a client of the front door, as the C API is: a file of tools/ may include
# its own folder's headers, the engine's, perf/'s (the machine's measures, the reports' rendering),
# core/'s, the public kiln/ header and the server that `kiln serve` starts; no layer under the
# engine. The kiln target links the engine and so reaches every layer, hence a list written here
# rather than read from the links.
set(kiln_tools_may_include tools engine perf core kiln server)
list(JOIN kiln_tools_may_include " " kiln_tools_text)
file(WRITE ${CMAKE_BINARY_DIR}/kiln_tool_layers.txt "tools: ${kiln_tools_text}\n")
