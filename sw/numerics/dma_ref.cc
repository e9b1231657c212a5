#include "sw/numerics/dma_ref.h"

namespace tessera::dma {

Walk reference_walk(const Descriptor& d) {
  Walk w;
  const auto& l = d.loops;
  for (uint32_t i3 = 0; i3 < l[3].count; ++i3) {
    for (uint32_t i2 = 0; i2 < l[2].count; ++i2) {
      for (uint32_t i1 = 0; i1 < l[1].count; ++i1) {
        for (uint32_t i0 = 0; i0 < l[0].count; ++i0) {
          const int64_t a = static_cast<int64_t>(d.base) + i3 * l[3].stride + i2 * l[2].stride +
                            i1 * l[1].stride + i0 * l[0].stride;
          if (a < 0 || static_cast<uint64_t>(a) + d.elem_bytes > d.limit) {
            w.fault = true;
            w.fault_addr = a;
            return w;
          }
          w.addrs.push_back(static_cast<uint64_t>(a));
        }
      }
    }
  }
  return w;
}

Descriptor im2col_3x3(uint64_t base, int h, int w, unsigned eb, uint64_t limit) {
  Descriptor d;
  d.base = base;
  d.elem_bytes = eb;
  d.limit = limit;
  d.loops[3] = {static_cast<uint32_t>(h - 2), int64_t(w) * eb};  // output row
  d.loops[2] = {static_cast<uint32_t>(w - 2), int64_t(eb)};      // output column
  d.loops[1] = {3, int64_t(w) * eb};                             // kernel row
  d.loops[0] = {3, int64_t(eb)};                                 // kernel column
  return d;
}

Descriptor pool_2x2(uint64_t base, int h, int w, unsigned eb, uint64_t limit) {
  Descriptor d;
  d.base = base;
  d.elem_bytes = eb;
  d.limit = limit;
  d.loops[3] = {static_cast<uint32_t>(h / 2), int64_t(2) * w * eb};
  d.loops[2] = {static_cast<uint32_t>(w / 2), int64_t(2) * eb};
  d.loops[1] = {2, int64_t(w) * eb};
  d.loops[0] = {2, int64_t(eb)};
  return d;
}

Descriptor transpose(uint64_t base, int rows, int cols, unsigned eb, uint64_t limit) {
  Descriptor d;
  d.base = base;
  d.elem_bytes = eb;
  d.limit = limit;
  d.loops[1] = {static_cast<uint32_t>(cols), int64_t(eb)};
  d.loops[0] = {static_cast<uint32_t>(rows), int64_t(cols) * eb};
  return d;
}

Descriptor batch_slice(uint64_t base, int first, int count, int image_elems, unsigned eb,
                       uint64_t limit) {
  Descriptor d;
  d.base = base + uint64_t(first) * image_elems * eb;
  d.elem_bytes = eb;
  d.limit = limit;
  d.loops[1] = {static_cast<uint32_t>(count), int64_t(image_elems) * eb};
  d.loops[0] = {static_cast<uint32_t>(image_elems), int64_t(eb)};
  return d;
}

}  // namespace tessera::dma
