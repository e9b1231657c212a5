# Reads the `localparam` constants of a SystemVerilog package for the C++ side (the RTL packages
# are the one source of truth for every chip parameter: docs/architecture.md). Each constant is
# one line `localparam <type> NAME = VALUE;` with VALUE a decimal number or a sized literal
# (`W'hHEX`, `W'dDEC`, `W'bBIN`); anything else in such a line stops the configure step.
#
# tessera_sv_constants(<file> <prefix>) sets <prefix>_NAMES (the names in file order) and
# <prefix>_<NAME> (the value as a C++ literal: 0x... for hex, decimal otherwise) for each, and
# <prefix>_<NAME>_WIDE for a longint.
function(tessera_sv_constants file prefix)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  file(STRINGS ${file} _lines REGEX "^ *localparam ")
  set(_names "")
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "^ *localparam [a-z0-9_ ]*(\\[[0-9]+:0\\] *)?([A-Z][A-Za-z0-9_]*) *= *([^;]+);")
      set(_name ${CMAKE_MATCH_2})
      string(STRIP "${CMAKE_MATCH_3}" _v)
      if(_v MATCHES "^[0-9]+'[hH]([0-9A-Fa-f_]+)$")
        string(REPLACE "_" "" _v "0x${CMAKE_MATCH_1}")
      elseif(_v MATCHES "^[0-9]+'[dD]([0-9_]+)$")
        string(REPLACE "_" "" _v "${CMAKE_MATCH_1}")
      elseif(_v MATCHES "^[0-9]+'[bB]([01_]+)$")
        string(REPLACE "_" "" _bits "${CMAKE_MATCH_1}")
        math(EXPR _v "0b${_bits}" OUTPUT_FORMAT DECIMAL)
      elseif(_v MATCHES "^[0-9_]+$")
        string(REPLACE "_" "" _v "${_v}")
      else()
        # an expression (a function of other constants): the RTL's business, not the host's
        continue()
      endif()
      list(APPEND _names ${_name})
      set(${prefix}_${_name} ${_v} PARENT_SCOPE)
      if(_l MATCHES "localparam longint")
        set(${prefix}_${_name}_WIDE 1 PARENT_SCOPE)
      endif()
    else()
      message(FATAL_ERROR "${file}: cannot read the constant in: ${_l}")
    endif()
  endforeach()
  set(${prefix}_NAMES ${_names} PARENT_SCOPE)
endfunction()

# Appends `constexpr <type> NAME = VALUE;` for each constant of <prefix> to the variable <out>:
# uint64_t for a longint or where the value needs it, uint32_t otherwise.
function(tessera_sv_constants_cxx prefix out)
  set(_h "${${out}}")
  foreach(_n IN LISTS ${prefix}_NAMES)
    set(_v ${${prefix}_${_n}})
    set(_t uint32_t)
    if(${prefix}_${_n}_WIDE)
      set(_t uint64_t)
    elseif(_v MATCHES "^0x")
      string(LENGTH "${_v}" _len)
      if(_len GREATER 10)
        set(_t uint64_t)
      endif()
    elseif(_v GREATER 4294967295)
      set(_t uint64_t)
    endif()
    string(APPEND _h "constexpr ${_t} ${_n} = ${_v};\n")
  endforeach()
  set(${out} "${_h}" PARENT_SCOPE)
endfunction()
