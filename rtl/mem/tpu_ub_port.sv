// tpu_ub_port: a wide access on one port of the unified buffer (tpu_sram_banked, 32-byte words).
// A unit (the VPU) asks for Bytes = 4N or 2N bytes at a byte address aligned to Bytes; the
// adapter turns it into word accesses on its buffer port: one word (the Bytes within it, byte
// enables for a write) when Bytes <= 32, else Bytes / 32 consecutive words one after another.
// Upstream protocol (the same as a buffer port's, for the whole access): req_i held until
// gnt_o; gnt_o is high in the cycle the last word is granted; a read's data comes with rvalid_o
// the cycle after that. Latency: words cycles when the buffer grants every cycle.
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
  // one port of the buffer
  output logic               ub_req_o,
  input  logic               ub_gnt_i,
  output logic               ub_we_o,
  output logic [WAddrW-1:0]  ub_addr_o,              // word index
  output logic [WordBytes-1:0] ub_wmask_o,           // byte enables
  output logic [8*WordBytes-1:0] ub_wdata_o,
  input  logic               ub_rvalid_i,
  input  logic [8*WordBytes-1:0] ub_rdata_i
);
  localparam int unsigned KW = (Words > 1) ? $clog2(Words) : 1;
  localparam int unsigned WP = (W > 8 * WordBytes) ? W : 8 * WordBytes;  // padded to a word

  logic [WP-1:0] wpad;
  assign wpad = WP'(wdata_i);

  logic [KW-1:0] k_q;                                // next word of the access
  logic [KW-1:0] rk_q;                               // word whose read data comes next
  logic [WP-1:0] rbuf_q;
  logic          last_read_q;                        // the last word's read was granted
  logic [31:0]   off_q, bytes_q;                     // of the read whose data is returning

  // Bytes and words of this access.
  logic [31:0] bytes, nwords, off;
  assign bytes  = wide_i ? 32'(4 * N) : 32'(2 * N);
  assign nwords = (bytes > WordBytes) ? bytes / WordBytes : 32'd1;
  assign off    = (bytes >= WordBytes) ? 32'd0 : 32'(addr_i) % WordBytes;

  assign ub_req_o  = req_i;
  assign ub_we_o   = we_i;
  assign ub_addr_o = WAddrW'(32'(addr_i) / WordBytes) + WAddrW'(k_q);
  always_comb begin
    ub_wmask_o = '0;
    ub_wdata_o = '0;
    if (bytes >= WordBytes) begin
      ub_wmask_o = '1;
      ub_wdata_o = wpad[8*WordBytes*k_q +: 8*WordBytes];
    end else begin
      for (int b = 0; b < WordBytes; b++) begin
        if (32'(b) >= off && 32'(b) < off + bytes) begin
          ub_wmask_o[b]        = 1'b1;
          ub_wdata_o[8*b +: 8] = wpad[8*(32'(b) - off) +: 8];
        end
      end
    end
  end
  assign gnt_o = req_i && ub_gnt_i && 32'(k_q) == nwords - 32'd1;

  // Read data: word rk lands in rbuf at its place (a sub-word read: its bytes at bit 0).
  logic [WP-1:0] rnext;
  always_comb begin
    rnext = rbuf_q;
    if (ub_rvalid_i) begin
      if (bytes >= WordBytes) begin
        rnext[8*WordBytes*rk_q +: 8*WordBytes] = ub_rdata_i;
      end else begin
        rnext = '0;
        for (int b = 0; b < WordBytes; b++) begin
          if (32'(b) >= off_q && 32'(b) < off_q + bytes_q) begin
            rnext[8*(32'(b) - off_q) +: 8] = ub_rdata_i[8*b +: 8];
          end
        end
      end
    end
  end
  assign rvalid_o = last_read_q && ub_rvalid_i;
  assign rdata_o  = rnext[W-1:0];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      k_q         <= '0;
      rk_q        <= '0;
      last_read_q <= 1'b0;
      off_q       <= '0;
      bytes_q     <= '0;
    end else begin
      last_read_q <= gnt_o && !we_i;
      if (req_i && ub_gnt_i) begin
        k_q     <= gnt_o ? '0 : k_q + KW'(1);
        off_q   <= off;
        bytes_q <= bytes;
      end
      if (ub_rvalid_i) rk_q <= last_read_q ? '0 : rk_q + KW'(1);
    end
  end
  always_ff @(posedge clk_i) begin
    if (ub_rvalid_i) rbuf_q <= rnext;
  end
endmodule
