# A program that halts on a small chip (N = 4, 16 KiB UB, 64 ACC rows): a 4 x 4 bf16 tile and
# four activation rows from HBM, one matmul, relu, and a REPEAT that stores three more rows.
dma.loop   src, 0, 16, 2, 1, 0
dma.loop   dst, 0, 16, 2, 1, 0
dma.copy   hbm, ub, 2, 0x1000, 0x0
dma.copy   hbm, ub, 2, 0x1020, 0x40
signal     dma, sc0
wait       mxu, sc0, 1
mxu.ldw    0x0, 8
mxu.mm     set, 0x40, 8, 4, 0
signal     mxu, sc1
wait       vpu, sc1, 1
vpu.ld     acc, v1, 0
vpu.op     max, v2, v1, v0, v0
vpu.st     f32, v2, 0x100
vpu.li     v4, 0x3f800000, 1
repeat     3, 2
vpu.ld     acc, v3, 1, 1
vpu.st     f32, v3, 0x110, 16
vpu.op     bcast, v5, v2, v0, v0, 3
vpu.op     rsum, v6, v5, v0, v0
irq        1
halt
