// tpu_ici_pkg: the flits that cross an ICI link (docs/architecture.md, "ICI"). One flit is a
// 320-bit word: a remote write of one 32-byte memory word with byte strobes (to the
// neighbour's HBM or unified buffer), or a remote signal (one increment of the neighbour's
// remote counter RCsc). Layout: [319:318] kind, [317:291] word address (byte address / 32),
// [290:288] zero, [287:256] byte strobes, [255:0] data (byte k at bits 8k); a signal carries
// its counter in the word-address field.
package tpu_ici_pkg;
  localparam int unsigned FlitW = 320;

  localparam logic [1:0] FLIT_WRITE_HBM = 2'd0;
  localparam logic [1:0] FLIT_WRITE_UB  = 2'd1;
  localparam logic [1:0] FLIT_SIGNAL    = 2'd2;

  function automatic logic [FlitW-1:0] write_flit(input logic space, input logic [26:0] word,
                                                  input logic [31:0] strb,
                                                  input logic [255:0] data);
    write_flit = {space ? FLIT_WRITE_UB : FLIT_WRITE_HBM, word, 3'd0, strb, data};
  endfunction

  function automatic logic [FlitW-1:0] signal_flit(input logic [3:0] sc);
    signal_flit = {FLIT_SIGNAL, 23'd0, sc, 3'd0, 32'd0, 256'd0};
  endfunction

  localparam int unsigned KindLsb = 318;             // [319:318] kind
  localparam int unsigned WordLsb = 291;             // [317:291] word address / counter
endpackage
