// Reference model of the DMA address generator (rtl/dma/tpu_dma_agen.sv): the address list a
// descriptor walks, and where it faults. Also the descriptors of the patterns the training step
// needs (im2col, pooling windows, transpose, batch slice).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tessera::dma {

struct Loop {
  uint32_t count = 1;  // iterations, >= 1
  int64_t stride = 0;  // bytes
};

struct Descriptor {
  uint64_t base = 0;               // byte address of the first element
  std::array<Loop, 4> loops = {};  // loops[0] is the innermost
  uint64_t limit = 0;              // every element must lie in [0, limit)
  unsigned elem_bytes = 2;         // 2: bf16, 4: fp32
};

struct Walk {
  std::vector<uint64_t> addrs;  // emitted before the end or the fault
  bool fault = false;
  int64_t fault_addr = 0;  // the first out-of-range element address
};

// for i3, i2, i1, i0 (i0 fastest): base + sum(i_k * stride_k); stops at the first element that
// is negative or does not end below `limit`.
Walk reference_walk(const Descriptor& d);

// Element (oy, ox, ky, kx) of a 3x3 valid convolution's im2col over an h x w image (row-major,
// elem_bytes per pixel): address of pixel (oy + ky, ox + kx); kernel position fastest.
Descriptor im2col_3x3(uint64_t base, int h, int w, unsigned elem_bytes, uint64_t limit);
// 2x2 pooling windows over an h x w map (h, w even): window (py, px), element (wy, wx).
Descriptor pool_2x2(uint64_t base, int h, int w, unsigned elem_bytes, uint64_t limit);
// Column-major walk of a rows x cols row-major matrix (reads it transposed).
Descriptor transpose(uint64_t base, int rows, int cols, unsigned elem_bytes, uint64_t limit);
// Images first .. first + count - 1 of a batch of images of image_elems elements each.
Descriptor batch_slice(uint64_t base, int first, int count, int image_elems, unsigned elem_bytes,
                       uint64_t limit);

}  // namespace tessera::dma
