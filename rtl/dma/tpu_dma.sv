// tpu_dma: the DMA data mover. A descriptor names a source walk and a destination walk (each a
// tpu_dma_agen descriptor: base, four (count, stride) loops) over one of two address spaces
// (0 = HBM, 1 = the on-chip SRAM) and an element size (2 or 4 bytes, the same on both sides);
// element i of the source walk is copied to element i of the destination walk. Both walks hand
// out runs: up to a word's worth of consecutive elements (one 32-byte word, the innermost loop
// contiguous: tpu_dma_agen). Source side: each source run goes into a chunk queue (byte offset,
// element count, the read slot of its word, "new word" flag). The copy keeps its last ReadSlots
// source words (tags here, data beside the extractor, round-robin, emptied when a copy's source
// walk starts): a run in a word among them issues no read, any other issues one (an HBM
// single-burst request or an SRAM word read) into the next slot, up to MaxReads in flight, whose
// data returns in order into a data queue — so the overlapping runs of a patch gather (a kernel
// row of position m, then of m + 1, a pixel on) read each word once. Slots stay consistent
// without any check: the extractor takes chunks in the order they were queued, so a word
// reloaded into a slot reaches it after every earlier chunk has used the old one. Within a copy
// a source word never changes (source and destination do not overlap; another unit's write
// there would be a race). The extractor pairs the head chunk with the
// destination walk's run — min(elements left in the chunk, the destination run) elements move,
// shifted from their source to their destination offset — and merges them into a one-word
// write-combining buffer with byte strobes; when the next elements land in another word (or the
// walk ends) the word is written (an HBM write burst with strobes, or an SRAM write with a byte
// mask). Throughput: one run per cycle — a word (16 bf16 or 8 fp32 elements) per cycle for
// copies whose innermost loops are contiguous on both sides, as far as the memories deliver
// (one HBM pseudo-channel: a burst every two cycles), one element per cycle for gathers; reads
// run up to ElemDepth chunks / MaxReads words ahead of the writes, which hides HBM latencies up
// to about ElemDepth cycles. Latency: 1 cycle from acceptance to the checks, 1 more to the first
// read. done_o pulses when every write has been performed (HBM: all completions received), or
// with PostWrites when every HBM write has been issued (wr_pending_o until their completions).
// Back to back: once a copy's source walk has handed out its last run, the next descriptor is
// taken (a source in another space once the copy's reads have returned) and checked, and its
// source walk starts while the copy before still writes — the read latency of each copy hidden
// behind the tail of the one before — if both copies lie wholly in range (their walks' byte
// spans, computed in the check), neither writes remotely, and the next one's source span does
// not meet the span the copy before writes (no read overtakes a write it depends on). The next
// copy's destination walk starts when the copy before has issued its last write (its done_o),
// so writes stay in program order and no write overtakes an earlier read. A descriptor that
// fails these waits until the copy in progress is done and is then checked as if taken alone.
// Faults: illegal size, unequal element counts and misalignment are checked before anything
// moves; an out-of-range address is caught by the walk's generator before it is used. On a fault
// the walks stop, everything in flight drains, the elements before the first faulting element
// (in element order) are written, and the DMA goes idle with fault_o set.
`include "tpu_assert.svh"

module tpu_dma #(
  parameter int unsigned HbmAddrW      = 32,                      // HBM byte address width
  parameter longint unsigned HbmBytes  = 64'd1 << HbmAddrW,       // HBM space limit (bytes)
  parameter int unsigned SramBytes     = 65536,                   // SRAM space limit (bytes)
  parameter int unsigned SramWordBytes = 32,                      // SRAM word = 1 HBM burst
  parameter int unsigned MaxReads      = 16,                      // reads in flight, pow2
  parameter int unsigned MaxWrites     = 16,                      // HBM writes uncompleted
  parameter bit          PostWrites    = 1'b0,                    // done_o before HBM completions
  parameter int unsigned ElemDepth     = 64,                      // chunk queue, pow2
  parameter int unsigned ReadSlots     = tpu_pkg::DMA_READ_SLOTS, // source words kept, pow2 >= 2
  parameter int unsigned CountW        = 16,                      // loop count width
  localparam int unsigned AddrW        = HbmAddrW,                // both walks' address width
  localparam int unsigned WordBytes    = SramWordBytes,
  localparam int unsigned WordW        = 8 * WordBytes,
  localparam int unsigned SramAddrW    = $clog2(SramBytes / SramWordBytes)
) (
  input  logic                     clk_i,
  input  logic                     rst_ni,
  // descriptor (sampled when desc_valid_i && desc_ready_o)
  input  logic                     desc_valid_i,      // a descriptor is offered
  output logic                     desc_ready_o,      // idle: the descriptor is taken
  input  logic                     src_space_i,       // 0: HBM, 1: SRAM
  input  logic                     dst_space_i,       // 0: HBM, 1: SRAM
  input  logic                     dst_remote_i,      // 1: write the words to remote_w_*
  input  logic [3:0]               elem_bytes_i,      // 2 (bf16) or 4 (fp32), both sides
  input  logic [AddrW-1:0]         src_base_i,        // byte address of source element 0
  input  logic [4*CountW-1:0]      src_count_i,       // loop k's count at bits CountW*k
  input  logic [4*(AddrW+1)-1:0]   src_stride_i,      // loop k's signed byte stride
  input  logic [AddrW-1:0]         dst_base_i,        // the same for the destination walk
  input  logic [4*CountW-1:0]      dst_count_i,
  input  logic [4*(AddrW+1)-1:0]   dst_stride_i,
  // status
  output logic                     busy_o,            // a descriptor is in progress
  output logic                     done_o,            // one cycle: the descriptor finished
  output logic                     wr_pending_o,      // HBM writes without their completion
  output logic                     fault_o,           // sticky until the next descriptor
  output logic [3:0]               fault_code_o,      // DMA_FAULT_* (tpu_pkg), when fault_o
  output logic [AddrW:0]           fault_addr_o,      // signed byte address, when fault_o
  output logic [31:0]              elems_moved_o,     // elements written by this descriptor
  // HBM port (master): requests
  output logic                     hbm_req_valid_o,   // a request is offered
  input  logic                     hbm_req_ready_i,   // the slave takes it this cycle
  output logic                     hbm_req_write_o,   // 1: write, 0: read
  output logic [HbmAddrW-1:0]      hbm_req_addr_o,    // byte address, 32-byte aligned
  output logic [3:0]               hbm_req_len_o,     // bursts - 1 (always 0: one burst)
  output logic [3:0]               hbm_req_id_o,      // rolling, per direction
  // HBM port: write data (one beat per write burst, in request order)
  output logic                     hbm_wd_valid_o,
  input  logic                     hbm_wd_ready_i,
  output logic [WordW-1:0]         hbm_wd_data_o,     // byte k at bits 8k
  output logic [WordBytes-1:0]     hbm_wd_strb_o,     // bit k: write byte k
  // HBM port: read data (in request order)
  input  logic                     hbm_rd_valid_i,
  output logic                     hbm_rd_ready_o,
  input  logic [3:0]               hbm_rd_id_i,
  input  logic [WordW-1:0]         hbm_rd_data_i,
  input  logic                     hbm_rd_last_i,     // last burst of the request
  // HBM port: write completions (one per write request, in request order)
  input  logic                     hbm_wr_done_valid_i,
  output logic                     hbm_wr_done_ready_o,
  input  logic [3:0]               hbm_wr_done_id_i,
  // SRAM port (master): reads, data the cycle after the granted read
  output logic                     sram_rreq_o,
  input  logic                     sram_rgnt_i,       // the read happens when both are high
  output logic [SramAddrW-1:0]     sram_raddr_o,      // word index
  input  logic [WordW-1:0]         sram_rdata_i,
  // SRAM port: writes
  output logic                     sram_wreq_o,
  input  logic                     sram_wgnt_i,       // the write happens when both are high
  output logic [SramAddrW-1:0]     sram_waddr_o,      // word index
  output logic [WordBytes-1:0]     sram_wmask_o,      // byte enables
  output logic [WordW-1:0]         sram_wdata_o,
  // Remote destination (dst_remote_i): each destination word goes out here instead, taken
  // when remote_w_ready_i; it counts as performed when taken (the ICI link carries it on).
  output logic                     remote_w_valid_o,
  input  logic                     remote_w_ready_i,
  output logic                     remote_w_space_o,   // the destination space
  output logic [AddrW-OffW-1:0]    remote_w_word_o,    // word address in that space
  output logic [WordBytes-1:0]     remote_w_strb_o,
  output logic [WordW-1:0]         remote_w_data_o
);
  localparam int unsigned AW1     = AddrW + 1;                    // signed address width
  localparam int unsigned OffW    = $clog2(WordBytes);            // byte offset in a word
  localparam int unsigned WAddrW  = AddrW - OffW;                 // word address width
  localparam int unsigned CreditW = $clog2(MaxReads) + 1;
  localparam int unsigned WrOutW  = $clog2(MaxWrites) + 1;
  localparam int unsigned TotW    = 4 * CountW;                   // elements in a walk
  localparam logic [AW1-1:0] HbmLimit =
      (HbmBytes > (64'd1 << HbmAddrW)) ? AW1'(64'd1 << HbmAddrW) : AW1'(HbmBytes);
  localparam logic [AW1-1:0] SramLimit = AW1'(SramBytes);
  localparam logic SpaceHbm = 1'b0;

  // IdleS: nothing in progress. CheckS: the checks of the descriptor just taken. RunS: its
  // source walk runs or has run (its destination side may still wait for the copy before).
  // WaitS: the descriptor taken behind a copy failed the back-to-back conditions; it waits
  // until that copy is done, then is checked again as if taken alone.
  typedef enum logic [1:0] {IdleS, CheckS, RunS, WaitS} state_e;
  state_e state_q;
  logic   behind_q;        // the descriptor in CheckS was taken behind a copy in progress
  logic   dst_active_q;    // the destination side works on a copy (until its done_o)
  logic   dst_pend_q;      // the taken copy's source walk runs; its destination side waits
  // The destination side's copy: its space, remoteness and element size (the descriptor
  // registers already hold the next copy's).
  logic   dst_space_d, dst_remote_d;
  logic [3:0] elem_bytes_d;

  // ---------------------------------------------------------------------------------------------
  // Descriptor registers and the checks made before anything moves
  // ---------------------------------------------------------------------------------------------
  logic                 src_space_q, dst_space_q, dst_remote_q;
  logic [3:0]           elem_bytes_q;
  logic [AddrW-1:0]     src_base_q, dst_base_q;
  logic [4*CountW-1:0]  src_count_q, dst_count_q;
  logic [4*AW1-1:0]     src_stride_q, dst_stride_q;

  always_ff @(posedge clk_i) begin
    if (desc_valid_i && desc_ready_o) begin
      src_space_q  <= src_space_i;
      dst_space_q  <= dst_space_i;
      dst_remote_q <= dst_remote_i;
      elem_bytes_q <= elem_bytes_i;
      src_base_q   <= src_base_i;
      src_count_q  <= src_count_i;
      src_stride_q <= src_stride_i;
      dst_base_q   <= dst_base_i;
      dst_count_q  <= dst_count_i;
      dst_stride_q <= dst_stride_i;
    end
  end

  // Elements a walk visits: the product of its four counts.
  function automatic logic [TotW-1:0] walk_elems(input logic [4*CountW-1:0] count);
    walk_elems = TotW'(count[0 +: CountW]) * TotW'(count[CountW +: CountW]) *
                 TotW'(count[2*CountW +: CountW]) * TotW'(count[3*CountW +: CountW]);
  endfunction

  // The first misaligned element address of a walk, as {found, address}: the base if it is
  // misaligned, else base + stride_k for the innermost used loop k whose stride is misaligned
  // (every element before that one only moves along aligned strides).
  function automatic logic [AW1:0] first_misaligned(input logic [AddrW-1:0] base,
                                                    input logic [4*CountW-1:0] count,
                                                    input logic [4*AW1-1:0] stride,
                                                    input logic [3:0] eb);
    logic [AW1-1:0] mask;
    logic           found;
    logic [AW1-1:0] addr;
    mask  = AW1'(eb) - 1'b1;
    found = 1'b0;
    addr  = '0;
    for (int k = 3; k >= 0; k--) begin
      if ((count[CountW*k +: CountW] > 1) && ((stride[AW1*k +: AW1] & mask) != '0)) begin
        found = 1'b1;
        addr  = AW1'(base) + stride[AW1*k +: AW1];
      end
    end
    if ((AW1'(base) & mask) != '0) begin
      found = 1'b1;
      addr  = AW1'(base);
    end
    first_misaligned = {found, addr};
  endfunction

  // The bytes each walk of the newest descriptor touches, [lo, hi) signed: base plus each used
  // loop's full extent, (count - 1) x stride, below or above; one used loop (count > 1) a cycle
  // on one multiplier, in the cycles after the descriptor is taken (span_ok_q: typically 2 to 4).
  // Only back-to-back decisions wait for it.
  localparam int unsigned SpanW = AW1 + CountW + 3;
  logic [7:0]              span_left_q;               // loops still to add: walk (bit 2), loop
  logic [2:0]              span_idx;                  // the lowest of them
  logic [7:0]              span_used;                 // the offered descriptor's used loops
  logic                    span_ok_q;
  logic signed [SpanW-1:0] src_lo, src_hi, dst_lo, dst_hi;
  logic [CountW-1:0]       span_count;
  logic [AW1-1:0]          span_stride;
  logic signed [SpanW-1:0] span_ext;
  always_comb begin
    span_idx = '0;
    for (int k = 7; k >= 0; k--) if (span_left_q[k]) span_idx = 3'(k);
    for (int k = 0; k < 4; k++) begin
      span_used[k]     = src_count_i[CountW*k +: CountW] > 1;
      span_used[4 + k] = dst_count_i[CountW*k +: CountW] > 1;
    end
    span_count  = span_idx[2] ? dst_count_q[CountW*span_idx[1:0] +: CountW]
                              : src_count_q[CountW*span_idx[1:0] +: CountW];
    span_stride = span_idx[2] ? dst_stride_q[AW1*span_idx[1:0] +: AW1]
                              : src_stride_q[AW1*span_idx[1:0] +: AW1];
    span_ext    = '0;
    // evaluated only while the spans are being computed (operand isolation)
    if (!span_ok_q && span_count != '0)
      span_ext = $signed({{(SpanW-CountW){1'b0}}, span_count - 1'b1}) *
                 $signed({{(SpanW-AW1){span_stride[AW1-1]}}, span_stride});
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      span_left_q <= '0;
      span_ok_q   <= 1'b0;
      {src_lo, src_hi, dst_lo, dst_hi} <= '0;
    end else if (desc_valid_i && desc_ready_o) begin
      span_left_q <= span_used;
      span_ok_q   <= span_used == '0;
      src_lo     <= SpanW'(src_base_i);
      src_hi     <= SpanW'(src_base_i) + SpanW'(elem_bytes_i);
      dst_lo     <= SpanW'(dst_base_i);
      dst_hi     <= SpanW'(dst_base_i) + SpanW'(elem_bytes_i);
    end else if (!span_ok_q) begin
      if (span_idx[2]) begin
        if (span_ext < 0) dst_lo <= dst_lo + span_ext;
        else dst_hi <= dst_hi + span_ext;
      end else begin
        if (span_ext < 0) src_lo <= src_lo + span_ext;
        else src_hi <= src_hi + span_ext;
      end
      span_left_q[span_idx] <= 1'b0;
      if ((span_left_q & ~(8'd1 << span_idx)) == '0) span_ok_q <= 1'b1;
    end
  end
  // Both walks of the newest descriptor lie wholly inside their spaces (it cannot fault midway).
  logic span_safe;
  assign span_safe = span_ok_q && (src_lo >= 0) && (dst_lo >= 0) &&
                     (src_hi <= ((src_space_q == SpaceHbm) ? SpanW'(HbmLimit) : SpanW'(SramLimit))) &&
                     (dst_hi <= ((dst_space_q == SpaceHbm) ? SpanW'(HbmLimit) : SpanW'(SramLimit)));

  logic [TotW-1:0]     src_elems, dst_elems;
  logic [AW1:0]        src_misal, dst_misal;
  logic                check_fault;
  logic [3:0]          check_code;
  logic [AW1-1:0]      check_addr;
  always_comb begin
    src_elems   = '0;
    dst_elems   = '0;
    src_misal   = '0;
    dst_misal   = '0;
    check_fault = 1'b0;
    check_code  = tpu_pkg::DMA_FAULT_NONE;
    check_addr  = '0;
    // Used only in CheckS, one cycle a copy: evaluated only then (operand isolation; the
    // simulator skips the products and the alignment search in every other cycle).
    if (state_q == CheckS) begin
      src_elems = walk_elems(src_count_q);
      dst_elems = walk_elems(dst_count_q);
      src_misal = first_misaligned(src_base_q, src_count_q, src_stride_q, elem_bytes_q);
      dst_misal = first_misaligned(dst_base_q, dst_count_q, dst_stride_q, elem_bytes_q);
      check_fault = 1'b1;
      check_addr  = '0;
      if ((elem_bytes_q != 4'd2) && (elem_bytes_q != 4'd4)) begin
        check_code = tpu_pkg::DMA_FAULT_ELEM_SIZE;
      end else if (src_elems != dst_elems) begin
        check_code = tpu_pkg::DMA_FAULT_COUNT;
      end else if (src_elems == '0) begin
        check_fault = 1'b0;                             // nothing to move: no address is used
        check_code  = tpu_pkg::DMA_FAULT_NONE;
      end else if (src_misal[AW1]) begin
        check_code = tpu_pkg::DMA_FAULT_ALIGN;
        check_addr = src_misal[AW1-1:0];
      end else if (dst_misal[AW1]) begin
        check_code = tpu_pkg::DMA_FAULT_ALIGN;
        check_addr = dst_misal[AW1-1:0];
      end else begin
        check_fault = 1'b0;
        check_code  = tpu_pkg::DMA_FAULT_NONE;
      end
    end
  end
  // A walk of no elements (a count of 0 on both sides) moves nothing and finishes at once (read
  // only in CheckS).
  logic check_empty;
  assign check_empty = src_elems == '0;

  // A copy checked alone starts both walks; one taken behind a copy in progress starts its
  // source walk (if it may run back to back) and its destination walk once that copy is done.
  // Behind a copy, the source walk must not read what that copy still writes: another space,
  // or bytes outside the copy's destination span (cur_dlo_q .. cur_dhi_q).
  logic check_ok, behind_go, src_start, dst_start, dst_done;
  logic signed [SpanW-1:0] cur_dlo_q, cur_dhi_q;
  assign check_ok  = (state_q == CheckS) && !check_fault && !check_empty;
  assign behind_go = span_safe && ((src_space_q != dst_space_d) ||
                                    ((src_space_q != SpaceHbm) &&
                                     ((src_hi <= cur_dlo_q) || (cur_dhi_q <= src_lo))));
  assign src_start = check_ok && (!behind_q || behind_go);
  // (behind a copy, CheckS lasts until the spans are known)
  assign dst_start = (check_ok && !behind_q) || (dst_pend_q && !dst_active_q);

  // ---------------------------------------------------------------------------------------------
  // The two walks
  // ---------------------------------------------------------------------------------------------
  logic             src_abort, src_idle, src_avalid, src_aready, src_fault;
  logic [AddrW-1:0] src_addr;
  logic [AW1-1:0]   src_fault_addr;
  logic [31:0]      src_fault_index;
  logic             dst_abort, dst_idle, dst_avalid, dst_aready, dst_fault;
  logic [AddrW-1:0] dst_addr;
  logic [AW1-1:0]   dst_fault_addr;
  logic [31:0]      dst_fault_index;
  logic             unused_src_last, unused_dst_last;
  logic [4:0]       src_run, dst_run;                 // elements the walks offer this cycle
  logic [4:0]       ex_m;                             // elements the extractor moves

  tpu_dma_agen #(
    .AddrW  (AddrW),
    .CountW (CountW)
  ) u_src_agen (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .start_i       (src_start),
    .abort_i       (src_abort),
    .idle_o        (src_idle),
    .base_i        (src_base_q),
    .count_i       (src_count_q),
    .stride_i      (src_stride_q),
    .limit_i       ((src_space_q == SpaceHbm) ? HbmLimit : SramLimit),
    .elem_bytes_i  (elem_bytes_q),
    .addr_valid_o  (src_avalid),
    .addr_ready_i  (src_aready),
    .addr_o        (src_addr),
    .run_o         (src_run),
    .take_i        (src_run),
    .addr_last_o   (unused_src_last),
    .fault_o       (src_fault),
    .fault_addr_o  (src_fault_addr),
    .fault_index_o (src_fault_index)
  );

  tpu_dma_agen #(
    .AddrW  (AddrW),
    .CountW (CountW)
  ) u_dst_agen (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .start_i       (dst_start),
    .abort_i       (dst_abort),
    .idle_o        (dst_idle),
    .base_i        (dst_base_q),
    .count_i       (dst_count_q),
    .stride_i      (dst_stride_q),
    .limit_i       ((dst_space_q == SpaceHbm) ? HbmLimit : SramLimit),
    .elem_bytes_i  (elem_bytes_q),
    .addr_valid_o  (dst_avalid),
    .addr_ready_i  (dst_aready),
    .addr_o        (dst_addr),
    .run_o         (dst_run),
    .take_i        (ex_m),
    .addr_last_o   (unused_dst_last),
    .fault_o       (dst_fault),
    .fault_addr_o  (dst_fault_addr),
    .fault_index_o (dst_fault_index)
  );

  // The source side runs the newest copy (RunS); the destination side its own (dst_active_q).
  logic running, dst_running;
  assign running     = state_q == RunS;
  assign dst_running = dst_active_q;

  // ---------------------------------------------------------------------------------------------
  // Source side: element queue, read requests, read data
  // ---------------------------------------------------------------------------------------------
  // Chunk queue entry: {starts a new word, its read slot, byte offset in its word, elements
  // (1 .. 16)}.
  localparam int unsigned SlotW = $clog2(ReadSlots);
  localparam int unsigned EntW  = 1 + SlotW + OffW + 5;
  if (ReadSlots < 2 || (ReadSlots & (ReadSlots - 1)) != 0) begin : g_bad_read_slots
    $error("tpu_dma: ReadSlots %0d is not a power of two >= 2 (victim_q wraps)", ReadSlots);
  end
  logic              efifo_push, efifo_pop, efifo_full, efifo_empty;
  logic [EntW-1:0]   efifo_head;
  logic [$clog2(ElemDepth):0] unused_efifo_count;
  // Read data queue: one word per issued read, in order.
  logic              dfifo_push, dfifo_pop, dfifo_full, dfifo_empty;
  logic [WordW-1:0]  dfifo_in, dfifo_head;
  logic [$clog2(MaxReads):0] dfifo_count;

  logic [ReadSlots-1:0] tag_valid_q;                  // the copy's words kept: which slots hold
  logic [WAddrW-1:0] tag_q [ReadSlots];               // ... and their word addresses
  logic [SlotW-1:0]  victim_q;                        // the slot the next read fills
  logic              rq_valid_q;                      // a read request waits to be issued
  logic [WAddrW-1:0] rq_word_q;
  logic              rq_issue;                        // the waiting read is taken this cycle
  logic [CreditW-1:0] inflight_q;                     // reads issued or waiting, not yet popped
  logic              sram_rd_pend_q;                  // SRAM read data arrives this cycle
  logic [3:0]        rd_id_q;                         // id of the next read request

  logic [WAddrW-1:0] src_word;
  logic              src_new_word, src_take, rq_load;
  logic [SlotW-1:0]  hit_slot, src_slot;
  assign src_word = src_addr[AddrW-1:OffW];
  always_comb begin
    src_new_word = 1'b1;
    hit_slot     = '0;
    for (int k = 0; k < ReadSlots; k++)
      if (tag_valid_q[k] && tag_q[k] == src_word) begin
        src_new_word = 1'b0;
        hit_slot     = SlotW'(k);
      end
  end
  assign src_slot = src_new_word ? victim_q : hit_slot;
  // Dst fault: stop taking source addresses (the walk is aborted this cycle).
  assign src_aready   = running && !dst_fault && !efifo_full &&
                        (!src_new_word || ((!rq_valid_q || rq_issue) &&
                                           (inflight_q < CreditW'(MaxReads))));
  assign src_take     = src_avalid && src_aready;
  assign rq_load      = src_take && src_new_word;
  assign efifo_push   = src_take;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      tag_valid_q    <= '0;
      victim_q       <= '0;
      rq_valid_q     <= 1'b0;
      rq_word_q      <= '0;
      inflight_q     <= '0;
      sram_rd_pend_q <= 1'b0;
      rd_id_q        <= '0;
    end else begin
      if (src_start) begin
        tag_valid_q <= '0;
        victim_q    <= '0;
      end else if (rq_load) begin
        tag_valid_q[victim_q] <= 1'b1;
        victim_q              <= victim_q + 1'b1;
      end
      if (rq_load) begin
        rq_valid_q <= 1'b1;
        rq_word_q  <= src_word;
      end else if (rq_issue) begin
        rq_valid_q <= 1'b0;
      end
      if (rq_issue && (src_space_q == SpaceHbm)) rd_id_q <= rd_id_q + 1'b1;
      inflight_q     <= inflight_q + CreditW'(rq_load) - CreditW'(dfifo_pop);
      sram_rd_pend_q <= sram_rreq_o && sram_rgnt_i;
    end
  end
  always_ff @(posedge clk_i) begin
    if (rq_load) tag_q[victim_q] <= src_word;
  end

  tpu_dma_fifo #(
    .Width (EntW),
    .Depth (ElemDepth)
  ) u_efifo (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (efifo_push),
    .data_i  ({src_new_word, src_slot, src_addr[OffW-1:0], src_run}),
    .full_o  (efifo_full),
    .pop_i   (efifo_pop),
    .data_o  (efifo_head),
    .empty_o (efifo_empty),
    .count_o (unused_efifo_count)
  );

  // SRAM reads: the waiting request, granted when the SRAM allows.
  assign sram_rreq_o  = rq_valid_q && (src_space_q != SpaceHbm);
  assign sram_raddr_o = rq_word_q[SramAddrW-1:0];

  // Read data: from whichever space the source is in (a source walk in the other space starts
  // only once every read before it has returned: behind_ok). Credits keep the data queue from
  // overflowing, so the HBM read data is always taken.
  assign hbm_rd_ready_o = !dfifo_full;
  assign dfifo_push = sram_rd_pend_q || (hbm_rd_valid_i && hbm_rd_ready_o);
  assign dfifo_in   = sram_rd_pend_q ? sram_rdata_i : hbm_rd_data_i;

  tpu_dma_fifo #(
    .Width (WordW),
    .Depth (MaxReads)
  ) u_dfifo (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (dfifo_push),
    .data_i  (dfifo_in),
    .full_o  (dfifo_full),
    .pop_i   (dfifo_pop),
    .data_o  (dfifo_head),
    .empty_o (dfifo_empty),
    .count_o (dfifo_count)
  );

  // ---------------------------------------------------------------------------------------------
  // Extractor: one run per cycle from the read words to the destination walk
  // ---------------------------------------------------------------------------------------------
  logic [WordW-1:0] slot_q [ReadSlots];               // the words of the read slots
  logic [SlotW-1:0] ex_head_slot;
  logic [4:0]       ex_done_q;                        // elements of the head chunk already moved
  logic             ex_head_new, ex_new, ex_valid, ex_move, ex_discard, ex_pop, ex_last;
  logic [OffW-1:0]  ex_head_off, ex_off;
  logic [4:0]       ex_head_n, ex_left;
  logic [OffW-1:0]  ex_done_bytes;
  logic [WordW-1:0] ex_word;
  assign {ex_head_new, ex_head_slot, ex_head_off, ex_head_n} = efifo_head;
  // A new word is at the head of the data queue until the chunk's first elements move (then it
  // goes into the chunk's slot); a kept word is in its slot.
  assign ex_new        = ex_head_new && (ex_done_q == '0);
  assign ex_left       = ex_head_n - ex_done_q;
  // (A chunk holds at most 16 bf16 / 8 fp32 elements: the offset stays inside the word.)
  assign ex_done_bytes = (elem_bytes_d == 4'd4) ? OffW'({ex_done_q[2:0], 2'b00})
                                                : OffW'({ex_done_q[3:0], 1'b0});
  assign ex_off        = ex_head_off + ex_done_bytes;
  assign ex_valid      = !efifo_empty && (!ex_new || !dfifo_empty);
  assign ex_word       = ex_new ? dfifo_head : slot_q[ex_head_slot];
  assign ex_m          = (dst_run < ex_left) ? dst_run : ex_left;
  assign ex_last       = ex_m == ex_left;               // this move finishes the head chunk

  // Write-combining buffer: one destination word with byte strobes.
  logic                 wc_valid_q;
  logic [WAddrW-1:0]    wc_word_q;
  logic [WordW-1:0]     wc_data_q;
  logic [WordBytes-1:0] wc_strb_q;
  // Words waiting to be written: {word address, strobes, data}.
  localparam int unsigned WqW = WAddrW + WordBytes + WordW;
  logic                 wq_push, wq_pop, wq_full, wq_empty;
  logic [WqW-1:0]       wq_in, wq_head;
  logic [1:0]           unused_wq_count;

  logic [WAddrW-1:0]    dst_word;
  logic [OffW-1:0]      dst_off;
  logic                 wc_hit, src_exhausted, no_more, wc_flush;
  logic [WordBytes-1:0] new_strb;
  logic [6:0]           move_bytes;
  assign dst_word   = dst_addr[AddrW-1:OffW];
  assign dst_off    = dst_addr[OffW-1:0];
  assign wc_hit     = wc_valid_q && (dst_word == wc_word_q);
  assign move_bytes = (elem_bytes_d == 4'd4) ? {ex_m, 2'b00} : {1'b0, ex_m, 1'b0};
  assign new_strb   = (~({WordBytes{1'b1}} << move_bytes)) << dst_off;
  // The held word after a move: the moved bytes, from their offset in the source word to theirs
  // in the destination word, over `held` (the byte mask is new_strb's shifts on bits). Called
  // only for a move, so the 256-bit shifts are not evaluated on other cycles.
  function automatic logic [WordW-1:0] merge(input logic [WordW-1:0] held,
                                             input logic [WordW-1:0] from,
                                             input logic [OffW-1:0]  from_off,
                                             input logic [6:0]       bytes,
                                             input logic [OffW-1:0]  off);
    logic [WordW-1:0] data, mask;
    data  = (from >> {from_off, 3'b000}) << {off, 3'b000};
    mask  = (~({WordW{1'b1}} << {bytes, 3'b000})) << {off, 3'b000};
    merge = (held & ~mask) | (data & mask);
  endfunction

  // The source has no more elements to give: its walk ended (or faulted) and its queue is empty.
  assign src_exhausted = src_idle && efifo_empty;
  // No more elements will reach the buffer: flush what it holds.
  assign no_more    = dst_running && (dst_idle || src_exhausted);
  assign dst_aready = dst_running && ex_valid && (!wc_valid_q || wc_hit || !wq_full);
  assign ex_move    = dst_avalid && dst_aready;
  // After the destination walk stopped at a fault, leftover source elements are dropped (a
  // walk that ended normally leaves none of its own; what follows is the next copy's).
  assign ex_discard = dst_running && dst_idle && dst_fault && ex_valid;
  assign ex_pop     = (ex_move && ex_last) || ex_discard;
  assign efifo_pop  = ex_pop;
  assign dfifo_pop  = (ex_move || ex_discard) && ex_new;
  // Write the held word out: another word arrives, or nothing more will arrive.
  assign wc_flush   = wc_valid_q && !wq_full && ((ex_move && !wc_hit) || (!ex_move && no_more));
  assign wq_push    = wc_flush;
  assign wq_in      = {wc_word_q, wc_strb_q, wc_data_q};

  always_ff @(posedge clk_i) begin
    if (dfifo_pop) slot_q[ex_head_slot] <= dfifo_head;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ex_done_q <= '0;
    end else if (ex_pop) begin
      ex_done_q <= '0;
    end else if (ex_move) begin
      ex_done_q <= ex_done_q + ex_m;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wc_valid_q <= 1'b0;
      wc_word_q  <= '0;
      wc_data_q  <= '0;
      wc_strb_q  <= '0;
    end else if (ex_move) begin
      wc_valid_q <= 1'b1;
      wc_word_q  <= dst_word;
      if (wc_hit) begin
        wc_data_q <= merge(wc_data_q, ex_word, ex_off, move_bytes, dst_off);
        wc_strb_q <= wc_strb_q | new_strb;
      end else begin
        wc_data_q <= merge('0, ex_word, ex_off, move_bytes, dst_off);
        wc_strb_q <= new_strb;
      end
    end else if (wc_flush) begin
      wc_valid_q <= 1'b0;
    end
  end

  tpu_dma_fifo #(
    .Width (WqW),
    .Depth (2)
  ) u_wq (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (wq_push),
    .data_i  (wq_in),
    .full_o  (wq_full),
    .pop_i   (wq_pop),
    .data_o  (wq_head),
    .empty_o (wq_empty),
    .count_o (unused_wq_count)
  );

  logic [WAddrW-1:0]    wq_word;
  logic [WordBytes-1:0] wq_strb;
  logic [WordW-1:0]     wq_data;
  assign {wq_word, wq_strb, wq_data} = wq_head;

  // ---------------------------------------------------------------------------------------------
  // Destination writes and the shared HBM request channel
  // ---------------------------------------------------------------------------------------------
  // SRAM: the head word is written when granted.
  assign sram_wreq_o  = !wq_empty && (dst_space_d != SpaceHbm) && !dst_remote_d;
  assign sram_waddr_o = wq_word[SramAddrW-1:0];
  assign sram_wmask_o = wq_strb;
  assign sram_wdata_o = wq_data;

  // HBM: a write's request is taken from the head of the write queue, and its word moves into
  // a two-entry queue of data beats, which the port takes in order the cycle after their
  // requests (or later) — so the next word's request goes while the beat before is sent: one
  // write a cycle, as reads.
  logic                 pend_full, pend_empty;
  logic [WordBytes-1:0] pend_strb;
  logic [WordW-1:0]     pend_data;
  logic [1:0]           unused_pend_count;
  logic [3:0] wr_id_q;                                // id of the next write request
  logic [WrOutW-1:0] wr_out_q;                        // write requests without a completion
  logic       want_rd, want_wr, sel_wr, lock_q, lock_wr_q, rr_wr_q, req_fire;
  logic       wr_req_now, wr_wd_now;
  assign want_rd = rq_valid_q && (src_space_q == SpaceHbm);
  assign want_wr = !wq_empty && (dst_space_d == SpaceHbm) && !dst_remote_d &&
                   !pend_full && (wr_out_q < WrOutW'(MaxWrites));
  // A request offered and not taken stays offered (lock); otherwise reads and writes of one
  // copy alternate, and the writes of a copy go before the reads of the copy behind it (fewer
  // turnarounds of the HBM data bus).
  assign sel_wr  = lock_q ? lock_wr_q : (want_wr && (!want_rd || rr_wr_q || dst_pend_q));
  assign hbm_req_valid_o = sel_wr ? want_wr : want_rd;
  assign hbm_req_write_o = sel_wr;
  assign hbm_req_addr_o  = HbmAddrW'({(sel_wr ? wq_word : rq_word_q), {OffW{1'b0}}});
  assign hbm_req_len_o   = 4'd0;
  assign hbm_req_id_o    = sel_wr ? wr_id_q : rd_id_q;
  assign req_fire        = hbm_req_valid_o && hbm_req_ready_i;
  assign rq_issue        = rq_valid_q &&
                           ((src_space_q == SpaceHbm) ? (req_fire && !sel_wr) : sram_rgnt_i);

  assign hbm_wd_valid_o = !pend_empty;
  assign hbm_wd_data_o  = pend_data;
  assign hbm_wd_strb_o  = pend_strb;
  tpu_dma_fifo #(
    .Width (WordBytes + WordW),
    .Depth (2)
  ) u_pend (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .push_i  (wr_req_now),
    .data_i  ({wq_strb, wq_data}),
    .full_o  (pend_full),
    .pop_i   (wr_wd_now),
    .data_o  ({pend_strb, pend_data}),
    .empty_o (pend_empty),
    .count_o (unused_pend_count)
  );
  assign wr_req_now     = req_fire && sel_wr;
  assign wr_wd_now      = !pend_empty && hbm_wd_ready_i;
  assign wq_pop = !wq_empty && (dst_remote_d ? remote_w_ready_i :
                                (dst_space_d == SpaceHbm) ? wr_req_now : sram_wgnt_i);
  assign remote_w_valid_o = !wq_empty && dst_remote_d;
  assign remote_w_space_o = dst_space_d;
  assign remote_w_word_o  = wq_word;
  assign remote_w_strb_o  = wq_strb;
  assign remote_w_data_o  = wq_data;
  assign hbm_wr_done_ready_o = 1'b1;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_id_q       <= '0;
      wr_out_q      <= '0;
      lock_q        <= 1'b0;
      lock_wr_q     <= 1'b0;
      rr_wr_q       <= 1'b0;
    end else begin
      if (wr_req_now) wr_id_q <= wr_id_q + 1'b1;
      wr_out_q <= wr_out_q + WrOutW'(wr_req_now) - WrOutW'(hbm_wr_done_valid_i);
      lock_q    <= hbm_req_valid_o && !hbm_req_ready_i;
      lock_wr_q <= sel_wr;
      if (req_fire) rr_wr_q <= !sel_wr;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Control: accept, check, run, drain, report
  // ---------------------------------------------------------------------------------------------
  // The other walk stops when one faults: the source when the destination faulted; the
  // destination when the source has run out of elements (it faulted) before the destination
  // walk ended.
  assign src_abort = running && dst_fault && !src_idle;
  assign dst_abort = dst_running && src_exhausted && !dst_idle;

  logic dst_quiet, src_quiet;
  // With PostWrites a descriptor is done once its HBM writes are issued: their completions
  // may still be outstanding (wr_pending_o) while the next descriptor runs; this port's later
  // reads of the same addresses return the written data (tpu_hbm's ordering).
  assign src_quiet = src_idle && !rq_valid_q && (inflight_q == '0) && efifo_empty &&
                     !sram_rd_pend_q;
  assign dst_quiet = dst_idle && !wc_valid_q && wq_empty && pend_empty &&
                     (PostWrites || wr_out_q == '0);
  // The destination side's copy is done: its last word written; the source side is quiet too
  // unless it already runs the next copy.
  assign dst_done = dst_active_q && dst_quiet && (dst_pend_q || src_quiet);
  assign wr_pending_o = wr_out_q != '0;

  // The first fault in element order: the source's if it is not later than the destination's.
  logic           run_fault;
  logic [3:0]     run_code;
  logic [AW1-1:0] run_addr;
  always_comb begin
    run_fault = src_fault || dst_fault;
    run_code  = tpu_pkg::DMA_FAULT_NONE;
    run_addr  = '0;
    if (src_fault && (!dst_fault || (src_fault_index <= dst_fault_index))) begin
      run_code = tpu_pkg::DMA_FAULT_SRC_RANGE;
      run_addr = src_fault_addr;
    end else if (dst_fault) begin
      run_code = tpu_pkg::DMA_FAULT_DST_RANGE;
      run_addr = dst_fault_addr;
    end
  end

  // Idle, or behind a copy whose source walk has ended, under the back-to-back conditions
  // (the header); desc_ready_o looks at the offered descriptor's spaces.
  // A source in another space waits until the reads of the copy in progress have returned
  // (they and the new reads share the data queue, filled in issue order).
  logic behind_ok, reads_back;
  assign reads_back   = !rq_valid_q && !sram_rd_pend_q &&
                        (inflight_q == CreditW'(dfifo_count));
  assign behind_ok    = running && dst_active_q && !dst_pend_q && span_safe && src_idle &&
                        !dst_remote_d && !dst_remote_i && ((src_space_i == src_space_q) || reads_back);
  assign desc_ready_o = (state_q == IdleS) || behind_ok;
  assign busy_o       = state_q != IdleS;

  // The destination side: which copy it works on, and that copy's space and element size.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      dst_active_q <= 1'b0;
      dst_pend_q   <= 1'b0;
      cur_dlo_q    <= '0;
      cur_dhi_q    <= '0;
      dst_space_d  <= 1'b0;
      dst_remote_d <= 1'b0;
      elem_bytes_d <= 4'd2;
    end else begin
      // taken behind: the copy in progress's destination span, before the new one's replaces it
      if (desc_valid_i && desc_ready_o && running) begin
        cur_dlo_q <= dst_lo;
        cur_dhi_q <= dst_hi;
      end
      if (src_start && behind_q) dst_pend_q <= 1'b1;
      else if (dst_start) dst_pend_q <= 1'b0;
      if (dst_start) begin
        dst_active_q <= 1'b1;
        dst_space_d  <= dst_space_q;
        dst_remote_d <= dst_remote_q;
        elem_bytes_d <= elem_bytes_q;
      end else if (dst_done) begin
        dst_active_q <= 1'b0;
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q       <= IdleS;
      behind_q      <= 1'b0;
      done_o        <= 1'b0;
      fault_o       <= 1'b0;
      fault_code_o  <= tpu_pkg::DMA_FAULT_NONE;
      fault_addr_o  <= '0;
      elems_moved_o <= '0;
    end else begin
      done_o <= 1'b0;
      if (dst_start) elems_moved_o <= '0;
      else if (ex_move) elems_moved_o <= elems_moved_o + 32'(ex_m);
      // The destination side's copy finished (in any state: a copy taken behind it may be in
      // CheckS or WaitS); it cannot fault if a copy was taken behind it (span_safe).
      if (dst_done) begin
        done_o       <= 1'b1;
        fault_o      <= run_fault;
        fault_code_o <= run_code;
        fault_addr_o <= run_addr;
      end
      unique case (state_q)
        IdleS: begin
          if (desc_valid_i) begin
            state_q       <= CheckS;
            behind_q      <= 1'b0;
            fault_o       <= 1'b0;
            fault_code_o  <= tpu_pkg::DMA_FAULT_NONE;
            fault_addr_o  <= '0;
            elems_moved_o <= '0;
          end
        end
        CheckS: begin
          if (behind_q) begin
            // behind a copy, once the spans are known: start the source walk, or wait for that
            // copy and check again
            if (span_ok_q) state_q <= check_ok && behind_go ? RunS : WaitS;
          end else if (check_fault || check_empty) begin
            state_q      <= IdleS;
            done_o       <= 1'b1;
            fault_o      <= check_fault;
            fault_code_o <= check_code;
            fault_addr_o <= check_addr;
          end else begin
            state_q <= RunS;
          end
        end
        RunS: begin
          if (desc_valid_i && desc_ready_o) begin
            state_q  <= CheckS;
            behind_q <= 1'b1;
          end else if (dst_done && !dst_pend_q) begin
            state_q <= IdleS;
          end
        end
        WaitS: begin
          if (!dst_active_q) begin
            state_q       <= CheckS;
            behind_q      <= 1'b0;
            elems_moved_o <= '0;
          end
        end
        default: state_q <= IdleS;
      endcase
    end
  end

  // Ids the next read burst and the next write completion must carry (checked by assertions).
  logic [3:0] rd_rsp_id_q, wr_rsp_id_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_rsp_id_q <= '0;
      wr_rsp_id_q <= '0;
    end else begin
      if (hbm_rd_valid_i && hbm_rd_ready_o) rd_rsp_id_q <= rd_rsp_id_q + 1'b1;
      if (hbm_wr_done_valid_i) wr_rsp_id_q <= wr_rsp_id_q + 1'b1;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Invariants
  // ---------------------------------------------------------------------------------------------
  `TPU_ASSERT(SramWordIsOneHbmBurst, SramWordBytes == 32)
  `TPU_ASSERT(CreditsBounded, inflight_q <= CreditW'(MaxReads))
  `TPU_ASSERT_IMPLIES(ReadDataOnlyWhenExpected, dfifo_push, (inflight_q != '0) && !dfifo_full)
  `TPU_ASSERT(OneReadSourceAtATime, !(sram_rd_pend_q && hbm_rd_valid_i))
  `TPU_ASSERT_IMPLIES(ReadIdsInOrder, (hbm_rd_valid_i && hbm_rd_ready_o), hbm_rd_id_i == rd_rsp_id_q)
  `TPU_ASSERT_IMPLIES(SingleBurstReads, (hbm_rd_valid_i && hbm_rd_ready_o), hbm_rd_last_i)
  `TPU_ASSERT_IMPLIES(PendOnlyWhileRunning, !pend_empty, dst_running)
  `TPU_ASSERT_IMPLIES(CompletionOnlyWhenExpected, hbm_wr_done_valid_i, wr_out_q != '0)
  `TPU_ASSERT_IMPLIES(CompletionIdsInOrder, hbm_wr_done_valid_i, hbm_wr_done_id_i == wr_rsp_id_q)
  `TPU_ASSERT_IMPLIES(WriteQueueOnlyWhileRunning, !wq_empty, dst_running)
  `TPU_ASSERT_IMPLIES(MovesOnlyWhileRunning, ex_move, dst_running)
  `TPU_ASSERT_HELD(RequestHeldUntilTaken, hbm_req_valid_o, hbm_req_ready_i,
                   {hbm_req_write_o, hbm_req_addr_o})
  `TPU_ASSERT_HELD(WriteDataHeldUntilTaken, hbm_wd_valid_o, hbm_wd_ready_i, hbm_wd_strb_o)
endmodule
