// Wiring between HbmPortModel (harness/hbm/hbm_port_model.h) and a verilated master whose HBM
// port uses tpu_dma's names (hbm_req_*, hbm_wd_*, hbm_rd_*, hbm_wr_done_*): tpu_dma and
// tpu_dma_unit. drive_hbm_port() puts the slave's outputs of this cycle on the model's inputs;
// hbm_master_out() reads the master's outputs for HbmPortModel::edge().
#pragma once

#include "harness/hbm/hbm_port_model.h"
#include "harness/sram_port_model.h"

namespace tessera::hbm {

template <class Model>
void drive_hbm_port(Model& m, const HbmSlaveOut& h) {
  m.hbm_req_ready_i = h.req_ready;
  m.hbm_wd_ready_i = h.wd_ready;
  m.hbm_rd_valid_i = h.rd_valid;
  m.hbm_rd_id_i = h.rd_id;
  sram::put_bytes(m.hbm_rd_data_i, h.rd_data);
  m.hbm_rd_last_i = h.rd_last;
  m.hbm_wr_done_valid_i = h.wr_done_valid;
  m.hbm_wr_done_id_i = h.wr_done_id;
}

template <class Model>
HbmMasterOut hbm_master_out(const Model& m) {
  HbmMasterOut o;
  o.req_valid = m.hbm_req_valid_o;
  o.req_write = m.hbm_req_write_o;
  o.req_addr = m.hbm_req_addr_o;
  o.req_len = m.hbm_req_len_o;
  o.req_id = m.hbm_req_id_o;
  o.wd_valid = m.hbm_wd_valid_o;
  o.wd_data = sram::get_bytes(m.hbm_wd_data_o);
  o.wd_strb = m.hbm_wd_strb_o;
  o.rd_ready = m.hbm_rd_ready_o;
  o.wr_done_ready = m.hbm_wr_done_ready_o;
  return o;
}

}  // namespace tessera::hbm
