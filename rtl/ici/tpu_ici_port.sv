// tpu_ici_port: one chip-side port of an inter-chip (ICI) link, full duplex, with credit-based
// flow control. Transmit: a flit offered on flit_* is taken when the far receiver has buffer
// space for it (a credit) and the serializer is free, and goes out on link_* the next cycle;
// the link then carries it for SerCycles = ceil(flit bytes / LinkBytes) cycles, so one flit
// leaves every SerCycles cycles at most (the link bandwidth). Each credit the far receiver
// returns (credit_i) allows one more flit. Receive: flits arriving on link_* enter a Credits-deep
// buffer — the credits guarantee it never overflows — and leave on rx_*; every flit taken from
// it returns one credit to the far transmitter (credit_o, the next cycle). link_valid_o,
// link_flit_o and credit_o are registers: what a port sends depends only on its state, so the
// wire between two chips can be a plain delay line of the link latency (the multi-chip harness
// advances chips in lock-step windows of that length). Throughput: 1 / SerCycles flits a cycle
// when Credits covers the round trip (2 x latency + 3 cycles), else Credits per round trip.
`include "tpu_assert.svh"

module tpu_ici_port #(
  parameter int unsigned FlitW     = 320,             // bits per flit
  parameter int unsigned LinkBytes = 16,              // bytes the link carries per cycle
  parameter int unsigned Credits   = 8,               // receive buffer, flits (power of two)
  localparam int unsigned SerCycles = (FlitW / 8 + LinkBytes - 1) / LinkBytes,
  localparam int unsigned CrW       = $clog2(Credits + 1),
  localparam int unsigned SerW      = $clog2(SerCycles + 1)
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // transmit: from this chip
  input  logic             flit_valid_i,              // a flit is offered
  output logic             flit_ready_o,              // taken this cycle (credit, link free)
  input  logic [FlitW-1:0] flit_i,
  // transmit: to the wire
  output logic             link_valid_o,              // a flit goes out this cycle
  output logic [FlitW-1:0] link_flit_o,
  input  logic             credit_i,                  // the far receiver freed one buffer slot
  // receive: from the wire
  input  logic             link_valid_i,              // a flit arrives this cycle
  input  logic [FlitW-1:0] link_flit_i,
  output logic             credit_o,                  // one slot freed (to the far transmitter)
  // receive: to this chip
  output logic             rx_valid_o,                // a received flit is waiting
  input  logic             rx_ready_i,                // this chip takes it this cycle
  output logic [FlitW-1:0] rx_flit_o,
  // status
  output logic [CrW-1:0]   credits_o                  // flits the far receiver can still take
);
  // ---------------------------------------------------------------------------------------------
  // Transmit
  // ---------------------------------------------------------------------------------------------
  logic [CrW-1:0]  credits_q;
  logic [SerW-1:0] ser_q;                             // cycles the link stays busy
  logic            take;
  assign flit_ready_o = (credits_q != '0) && (ser_q == '0);
  assign take         = flit_valid_i && flit_ready_o;
  assign credits_o    = credits_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      credits_q    <= CrW'(Credits);
      ser_q        <= '0;
      link_valid_o <= 1'b0;
    end else begin
      credits_q    <= credits_q - CrW'(take) + CrW'(credit_i);
      ser_q        <= take ? SerW'(SerCycles - 1) : ((ser_q != '0) ? ser_q - 1'b1 : '0);
      link_valid_o <= take;
    end
  end

  always_ff @(posedge clk_i) begin
    if (take) link_flit_o <= flit_i;
  end

  // ---------------------------------------------------------------------------------------------
  // Receive
  // ---------------------------------------------------------------------------------------------
  logic rx_full, rx_empty, rx_pop;
  logic [$clog2(Credits):0] unused_rx_count;
  assign rx_pop     = rx_valid_o && rx_ready_i;
  assign rx_valid_o = !rx_empty;

  tpu_dma_fifo #(
    .Width (FlitW),
    .Depth (Credits)
  ) u_rx_buf (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (link_valid_i),
    .data_i  (link_flit_i),
    .full_o  (rx_full),
    .pop_i   (rx_pop),
    .data_o  (rx_flit_o),
    .empty_o (rx_empty),
    .count_o (unused_rx_count)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) credit_o <= 1'b0;
    else         credit_o <= rx_pop;
  end

  // ---------------------------------------------------------------------------------------------
  // Invariants
  // ---------------------------------------------------------------------------------------------
  `TPU_ASSERT(CreditsArePowerOfTwo, (Credits & (Credits - 1)) == 0)
  `TPU_ASSERT(NeverMoreCreditsThanSlots, credits_q <= CrW'(Credits))
  `TPU_ASSERT_IMPLIES(ArrivalsFitTheBuffer, link_valid_i, !rx_full)
endmodule
