// Internals of the assembler shared with its tests: the number and name parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/asm.h"

namespace tessera::assembler::detail {

// A decimal or 0x-hex integer with an optional leading '-'; nullopt when the text is not one
// or does not fit in 64 bits.
std::optional<int64_t> parse_integer(std::string_view text);

// Lower-cases ASCII.
std::string lower(std::string_view text);

}  // namespace tessera::assembler::detail
