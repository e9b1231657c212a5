# tests/sw/test_isa.cc, Assembler.EveryMnemonicAssemblesToItsFields (bcast lane 3: legal at N = 4)
nop
halt
fence
irq 7
wait vpu, sc15, 3
signal mxu, sc2
dma.loop dst, 1, 28, -2, 65535, 0x38
dma.copy ub, hbm, 4, 0x100, 0x10000
mxu.ldw 0x4000, -32
mxu.ldw 0x4000, -32, t
mxu.mm acc, 0x0, 32, 676, 12
vpu.ld bf16, v3, 0x40
vpu.st acc, v15, 1023
vpu.op sel, v1, v2, v3, v4
vpu.op bcast, v5, v6, v0, v0, 3
vpu.li v9, -1
wait dma, rc4, 2
signal dma, rc5, prev
dma.copy hbm, ub, 2, 0x20, 0x40, next
repeat 1000, 3
vpu.ld f32, v1, 0x80, 64
vpu.li v2, 0x00000001, -3
wait vpu, sc2, 7, 1
