// Ordered source list: packages first, then leaf modules, then the units that use them.
+incdir+rtl/pkg
rtl/pkg/tpu_pkg.sv
rtl/fpu/tpu_fp_pkg.sv
rtl/fpu/tpu_fpu.sv
rtl/fpu/tpu_fp_divsqrt.sv
rtl/mem/tpu_sram_sp.sv
rtl/mem/tpu_sram_dp.sv
rtl/mem/tpu_sram_banked.sv
rtl/dma/tpu_dma_agen.sv
rtl/dma/tpu_dma_fifo.sv
rtl/dma/tpu_dma.sv
rtl/hbm/tpu_hbm_ctrl.sv
rtl/hbm/tpu_hbm.sv
rtl/mxu/tpu_mxu_pe.sv
rtl/mxu/tpu_mxu_array.sv
rtl/mxu/tpu_mxu_acc_mem.sv
rtl/mxu/tpu_mxu.sv
