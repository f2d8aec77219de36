# The list of end-to-end programs, tests/e2e/programs.txt (its format is
# described there), for tests/e2e/CMakeLists.txt and examples/CMakeLists.txt.
#
#   rg_e2e_select(VAR TAG...): the names, in file order, of the entries that
#   have every TAG; a TAG written !TAG selects those without it.
set(RG_E2E_LIST ${PROJECT_SOURCE_DIR}/tests/e2e/programs.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${RG_E2E_LIST})

function(rg_e2e_select var)
  file(STRINGS ${RG_E2E_LIST} _lines)
  set(_out)
  foreach(_l IN LISTS _lines)
    string(REGEX REPLACE "#.*" "" _l "${_l}")
    string(REGEX MATCHALL "[^ \t]+" _w "${_l}")
    if(NOT _w)
      continue()
    endif()
    list(POP_FRONT _w _name)
    set(_ok TRUE)
    foreach(_t IN LISTS ARGN)
      if(_t MATCHES "^!(.*)")
        if(CMAKE_MATCH_1 IN_LIST _w)
          set(_ok FALSE)
        endif()
      elseif(NOT _t IN_LIST _w)
        set(_ok FALSE)
      endif()
    endforeach()
    if(_ok)
      list(APPEND _out ${_name})
    endif()
  endforeach()
  set(${var} ${_out} PARENT_SCOPE)
endfunction()
