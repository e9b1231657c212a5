// tpu_sram_banked: a banked on-chip buffer: Banks single-port macros (tpu_sram_sp) behind Ports
// requesters, so that units (DMA, MXU, VPU) touching different banks proceed in the same cycle.
// Word-interleaved, the bank bits swizzled: word address a lives in bank (the XOR of a's
// log2(Banks)-bit fields), at row a / Banks, so the Banks words of an aligned group are in
// different banks (an even word and the odd one after it always), and so are the words of a
// power-of-two stride (a unit streaming 4-word pixels would otherwise meet every other unit in
// one bank); two consecutive words across a group edge can share a bank. Each cycle every bank grants one of the ports that request it,
// round-robin from the port after the one it granted last (no port waits more than Ports - 1
// grants of that bank); with FirstPort < Ports that port is granted whenever it asks, and the
// others share the rest round-robin (their wait is then bounded only by its requests); a
// port's request is performed in the cycle gnt_o is high (req_i held
// until then), and a granted read returns its word on rdata_o with rvalid_o the cycle after.
// Latency: 1 cycle for a granted read; throughput: one access per bank per cycle.
// Never-written reads are reported by the macros' simulation check.
module tpu_sram_banked #(
  parameter int unsigned Banks = 4,                   // power of two
  parameter int unsigned Words = 1024,                // total depth, a multiple of Banks
  parameter int unsigned Elems = 16,                  // write-enable granules per word
  parameter int unsigned ElemW = 16,                  // bits per granule
  parameter int unsigned Ports = 3,                   // requesters
  parameter bit          CheckUnwritten = 1'b1,       // the macros' never-written-read check
  parameter int unsigned FirstPort = Ports,           // a port granted before round-robin (none)
                                                      // (the others wait while it asks)
  localparam int unsigned AddrW = $clog2(Words),
  localparam int unsigned Width = Elems * ElemW
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // per port p, fields at [W*p +: W]
  input  logic [Ports-1:0]       req_i,               // an access this cycle (held until gnt)
  output logic [Ports-1:0]       gnt_o,               // the access is performed this cycle
  input  logic [Ports-1:0]       we_i,                // 1: write, 0: read
  input  logic [Ports*AddrW-1:0] addr_i,              // word address, < Words
  input  logic [Ports*Elems-1:0] wmask_i,             // per-element write enable
  input  logic [Ports*Width-1:0] wdata_i,
  output logic [Ports-1:0]       rvalid_o,            // rdata_o holds the word read last cycle
  output logic [Ports*Width-1:0] rdata_o
);
  localparam int unsigned BankW = (Banks > 1) ? $clog2(Banks) : 1;
  localparam int unsigned RowW  = $clog2(Words / Banks);
  localparam int unsigned PortW = (Ports > 1) ? $clog2(Ports) : 1;
  localparam int unsigned FirstP = (FirstPort < Ports) ? FirstPort : 0;  // (in range when unused)

  logic [Banks-1:0]       bank_req;
  logic [Banks*PortW-1:0] bank_sel, rr_q;             // granted port, next priority
  logic [Banks-1:0]       bank_we;
  logic [Banks*RowW-1:0]  bank_row;
  logic [Banks*Elems-1:0] bank_wmask;
  logic [Banks*Width-1:0] bank_wdata, bank_rdata;
  logic [Ports-1:0]       rd_q;                       // a read granted last cycle
  logic [Ports*BankW-1:0] rd_bank_q;                  // from this bank

  localparam int unsigned BankBits = $clog2(Banks);   // 0 for one bank
  localparam int unsigned FoldStep = (BankBits > 0) ? BankBits : 1;
  logic [Ports*BankW-1:0] port_bank;                  // the bank each port addresses
  always_comb begin
    for (int p = 0; p < Ports; p++) begin
      logic [AddrW-1:0] a;
      logic [BankW-1:0] h;
      a = addr_i[AddrW*p +: AddrW];
      h = '0;
      if (Banks > 1)
        for (int k = 0; k < AddrW; k += FoldStep) h = h ^ BankW'(a >> k);
      port_bank[BankW*p +: BankW] = h;
    end
  end

  // Each bank: the first requesting port from its round-robin pointer on (no request, no
  // search: a simulator then does no work here).
  always_comb begin
    logic [PortW:0] pk;
    gnt_o    = '0;
    bank_req = '0;
    bank_sel = '0;
    pk       = '0;
    if (req_i != '0) begin
      for (int b = 0; b < Banks; b++) begin
        for (int k = Ports - 1; k >= 0; k--) begin
          pk = (PortW+1)'(rr_q[PortW*b +: PortW]) + (PortW+1)'(k);
          if (pk >= (PortW+1)'(Ports)) pk = pk - (PortW+1)'(Ports);
          if (req_i[pk[PortW-1:0]] && port_bank[BankW*pk[PortW-1:0] +: BankW] == BankW'(b)) begin
            bank_req[b]                = 1'b1;
            bank_sel[PortW*b +: PortW] = pk[PortW-1:0];
          end
        end
        if (FirstPort < Ports) begin
          if (req_i[FirstP] && port_bank[BankW*FirstP +: BankW] == BankW'(b)) begin
            bank_req[b]                = 1'b1;
            bank_sel[PortW*b +: PortW] = PortW'(FirstP);
          end
        end
      end
    end

    // A bank's row, write mask and data only for a request (its write mask and data only for
    // a write): idle banks see zeros, and a simulator moves no wide data for them.
    bank_we    = '0;
    bank_row   = '0;
    bank_wmask = '0;
    bank_wdata = '0;
    for (int b = 0; b < Banks; b++) begin
      logic [PortW-1:0]  p;
      logic [AddrW-1:0]  a;
      p = bank_sel[PortW*b +: PortW];
      a = addr_i[AddrW*p +: AddrW];
      if (bank_req[b]) begin
        gnt_o[p]                 = 1'b1;
        bank_we[b]               = we_i[p];
        bank_row[RowW*b +: RowW] = RowW'(a >> BankBits);
        if (we_i[p]) begin
          bank_wmask[Elems*b +: Elems] = wmask_i[Elems*p +: Elems];
          bank_wdata[Width*b +: Width] = wdata_i[Width*p +: Width];
        end
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rr_q      <= '0;
      rd_q      <= '0;
      rd_bank_q <= '0;
    end else begin
      for (int b = 0; b < Banks; b++) begin
        // (a grant to FirstPort leaves the others' round-robin where it was)
        if (bank_req[b] && !(FirstPort < Ports && bank_sel[PortW*b +: PortW] == PortW'(FirstP))) begin
          rr_q[PortW*b +: PortW] <= (bank_sel[PortW*b +: PortW] == PortW'(Ports - 1)) ? '0 :
                                    bank_sel[PortW*b +: PortW] + PortW'(1);
        end
      end
      for (int p = 0; p < Ports; p++) begin
        rd_q[p] <= gnt_o[p] && !we_i[p];
        rd_bank_q[BankW*p +: BankW] <= port_bank[BankW*p +: BankW];
      end
    end
  end

  // Per port on constant slices (a loop wrote computed slices: a wide insert per port a cycle
  // in the verilated model); the data only with rvalid.
  for (genvar p = 0; p < Ports; p++) begin : g_rdata
    assign rvalid_o[p]               = rd_q[p];
    assign rdata_o[Width*p +: Width] = rd_q[p] ? bank_rdata[Width*rd_bank_q[BankW*p +: BankW] +: Width]
                                               : '0;
  end

  for (genvar b = 0; b < Banks; b++) begin : g_bank
    tpu_sram_sp #(
      .Words(Words / Banks), .Elems(Elems), .ElemW(ElemW), .CheckUnwritten(CheckUnwritten)
    ) u_macro (
      .clk_i   (clk_i),
      .req_i   (bank_req[b]),
      .we_i    (bank_we[b]),
      .addr_i  (bank_row[RowW*b +: RowW]),
      .wmask_i (bank_wmask[Elems*b +: Elems]),
      .wdata_i (bank_wdata[Width*b +: Width]),
      .rdata_o (bank_rdata[Width*b +: Width])
    );
  end
endmodule
