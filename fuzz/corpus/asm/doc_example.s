# docs/isa.md, "Assembly syntax": the example program
dma.loop   src, 0, 28, 2, 26, 56      # loops 0 and 1 of the source walk
dma.copy   hbm, ub, 2, 0x10000, 0x0
signal     dma, sc0
wait       mxu, sc0, 1
mxu.ldw    0x4000, 32
mxu.mm     set, 0x0, 32, 676, 0
signal     mxu, sc1
wait       vpu, sc1, 1
vpu.ld     acc, v1, 0
vpu.op     max, v2, v1, v0, v0       # relu: max(x, 0) with v0 = 0
vpu.st     bf16, v2, 0x8000
halt
