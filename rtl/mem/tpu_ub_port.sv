// tpu_ub_port: a wide access on two ports of the unified buffer (tpu_sram_banked, 32-byte words).
// A unit (the VPU) asks for Bytes = 4N or 2N bytes at a byte address aligned to Bytes; the
// adapter turns it into word accesses: one word on port 0 (the Bytes within it, byte enables
// for a write) when Bytes <= 32, else Bytes / 32 consecutive words two at a time — the even
// word on port 0, the odd one on port 1, each port holding its request until granted — so that
// a 4N-byte access at N = 16 takes one cycle (the two words lie in different banks).
// Upstream protocol (the same as a buffer port's, for the whole access): req_i held until
// gnt_o; gnt_o is high in the cycle the last word is granted; a read's data comes with rvalid_o
// the cycle after that. Latency: ceil(words / 2) cycles when the buffer grants every cycle.
`include "tpu_assert.svh"

module tpu_ub_port #(
  parameter int unsigned N       = 16,               // lanes: accesses of 4N or 2N bytes
  parameter int unsigned UbBytes = 262144,
  localparam int unsigned WordBytes = 32,
  localparam int unsigned AddrW     = $clog2(UbBytes),
  localparam int unsigned WAddrW    = $clog2(UbBytes / WordBytes),
  localparam int unsigned W         = 32 * N,        // widest access, bits
  localparam int unsigned Words     = (4 * N > WordBytes) ? 4 * N / WordBytes : 1
) (
  input  logic               clk_i,
  input  logic               rst_ni,
  // the unit's access
  input  logic               req_i,
  output logic               gnt_o,
  input  logic               we_i,
  input  logic               wide_i,                 // 1: 4N bytes, 0: 2N bytes
  input  logic [AddrW-1:0]   addr_i,                 // byte address, aligned to the size
  input  logic [W-1:0]       wdata_i,                // the bytes, from bit 0
  output logic               rvalid_o,
  output logic [W-1:0]       rdata_o,
  // two ports of the buffer, port q's fields at [F*q +: F]
  output logic [1:0]               ub_req_o,
  input  logic [1:0]               ub_gnt_i,
  output logic [1:0]               ub_we_o,
  output logic [2*WAddrW-1:0]      ub_addr_o,        // word index
  output logic [2*WordBytes-1:0]   ub_wmask_o,       // byte enables
  output logic [2*8*WordBytes-1:0] ub_wdata_o,
  input  logic [1:0]               ub_rvalid_i,
  input  logic [2*8*WordBytes-1:0] ub_rdata_i
);
  localparam int unsigned KW = (Words > 1) ? $clog2(Words) : 1;
  localparam int unsigned WP = (W > 8 * WordBytes) ? W : 8 * WordBytes;  // padded to a word
  localparam int unsigned WordW = 8 * WordBytes;

  logic [WP-1:0] wpad;
  assign wpad = WP'(wdata_i);

  logic [KW-1:0] k_q;                                // the access's next pair: words k, k + 1
  logic [1:0]    done_q;                             // port q's word of the pair is granted
  logic [2*KW-1:0] rk_q;                             // per port: the word its read data holds
  logic [WP-1:0] rbuf_q;
  logic          last_read_q;                        // the last word's read was granted
  logic [31:0]   off_q, bytes_q;                     // of the read whose data is returning

  // Bytes and words of this access.
  logic [31:0] bytes, nwords, off;
  assign bytes  = wide_i ? 32'(4 * N) : 32'(2 * N);
  assign nwords = (bytes > WordBytes) ? bytes / WordBytes : 32'd1;
  assign off    = (bytes >= WordBytes) ? 32'd0 : 32'(addr_i) % WordBytes;

  // Port q carries word k_q + q of the pair (port 1 only when the access has that word).
  logic [1:0] has, fin;
  logic       pair_done;
  assign has = {32'(k_q) + 32'd1 < nwords, 1'b1};
  always_comb begin
    for (int q = 0; q < 2; q++) begin
      ub_req_o[q] = req_i && has[q] && !done_q[q];
      ub_we_o[q]  = we_i;
      ub_addr_o[WAddrW*q +: WAddrW] = WAddrW'(32'(addr_i) / WordBytes) + WAddrW'(k_q) +
                                      WAddrW'(q);
    end
  end
  // (apart from the requests: a grant depends on them, never they on a grant)
  assign fin = ~has | done_q | ub_gnt_i;
  assign pair_done = req_i && fin == 2'b11;
  assign gnt_o     = pair_done && 32'(k_q) + 32'd2 >= nwords;

  always_comb begin
    ub_wmask_o = '0;
    ub_wdata_o = '0;
    if (bytes >= WordBytes) begin
      for (int q = 0; q < 2; q++) begin
        ub_wmask_o[WordBytes*q +: WordBytes] = '1;
        if (32'(k_q) + 32'(q) < 32'(Words))
          ub_wdata_o[WordW*q +: WordW] = wpad[WordW*(32'(k_q) + 32'(q)) +: WordW];
      end
    end else begin
      for (int b = 0; b < WordBytes; b++) begin
        if (32'(b) >= off && 32'(b) < off + bytes) begin
          ub_wmask_o[b]        = 1'b1;
          ub_wdata_o[8*b +: 8] = wpad[8*(32'(b) - off) +: 8];
        end
      end
    end
  end

  // Read data: each port's word lands in rbuf at its place (a sub-word read: its bytes at bit 0).
  logic [WP-1:0] rnext;
  always_comb begin
    rnext = rbuf_q;
    if (bytes_q >= WordBytes) begin
      for (int q = 0; q < 2; q++) begin
        if (ub_rvalid_i[q]) rnext[WordW*rk_q[KW*q +: KW] +: WordW] = ub_rdata_i[WordW*q +: WordW];
      end
    end else if (ub_rvalid_i[0]) begin
      rnext = '0;
      for (int b = 0; b < WordBytes; b++) begin
        if (32'(b) >= off_q && 32'(b) < off_q + bytes_q) begin
          rnext[8*(32'(b) - off_q) +: 8] = ub_rdata_i[8*b +: 8];
        end
      end
    end
  end
  assign rvalid_o = last_read_q;
  assign rdata_o  = rnext[W-1:0];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      k_q         <= '0;
      done_q      <= '0;
      rk_q        <= '0;
      last_read_q <= 1'b0;
      off_q       <= '0;
      bytes_q     <= '0;
    end else begin
      last_read_q <= gnt_o && !we_i;
      if (pair_done) begin
        k_q    <= gnt_o ? '0 : k_q + KW'(2);
        done_q <= '0;
      end else if (req_i) begin
        done_q <= done_q | (ub_req_o & ub_gnt_i);
      end
      for (int q = 0; q < 2; q++) begin
        if (ub_req_o[q] && ub_gnt_i[q] && !we_i) rk_q[KW*q +: KW] <= k_q + KW'(q);
      end
      if (req_i && ub_gnt_i != '0) begin
        off_q   <= off;
        bytes_q <= bytes;
      end
    end
  end
  always_ff @(posedge clk_i) begin
    if (ub_rvalid_i != '0) rbuf_q <= rnext;
  end

  // The cycle after the last grant of a read, its last word's data arrives (the buffer's
  // one-cycle read latency): rvalid_o then carries every word.
  `TPU_ASSERT_IMPLIES(ReadDataWithTheLastWord, last_read_q, ub_rvalid_i != '0)
  `TPU_ASSERT_IMPLIES(Port1OnlyForWholeWords, ub_req_o[1], bytes > WordBytes)
endmodule
