# a program
# (tests/sw/test_isa.cc, Assembler.CaseCommentsBlankLinesAndNumbers)

   DMA.Copy  HBM , Ub,2,0X10,  16   # comment, with commas
	WAIT Dma,SC3,0x0
mxu.mm SET, 0xFfE0, 0xFFFFFFE0, 1, 0   #
Vpu.Op MAX, V2, V1, V0, V0
dma.loop src, 0, 1, -2147483648, 1, 2147483647
vpu.li v0, 0x80000000
vpu.li v0, -2147483648
irq 4294967295
