// The fuzz targets' property check: a failed property is a finding like a sanitizer report
// (libFuzzer saves the input as a crash artifact), with the property in the message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, what)                                                            \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: property failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                            \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
