#!/usr/bin/env bash
# make bench (HBM part): generates request traces under <out>/traces/ and replays each through
# the HBM2 memory system with `tessera hbm-replay --json` on 1, 2, 4, 8 and 16 pseudo-channels:
#   stream_read, stream_write  sequential 32-byte requests, 2*10^5 per pseudo-channel, all at
#                              cycle 0 (as fast as the memory takes them)
#   mix_2r1w                   sequential, two reads then one write, reads and writes in
#                              different regions (reads from 0, writes from half the capacity)
#   random_read_32             random 32-byte reads over the whole capacity, all at cycle 0
#   random_read_64             random 64-byte reads (--request-bytes 64), all at cycle 0
#   random_2r1w                random 32-byte requests, two reads then a write, all at cycle 0
#   unloaded_read              single random 32-byte reads 200 cycles apart (unloaded latency)
# Every run checks every read against the scoreboard and every command against the timing
# checker. Results: <out>/hbm.json, a JSON array of {"name", "value", "unit", "params"}, and a
# table on stdout. BENCH_HBM_SCALE (default 1) scales every trace's length.
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
cd "$(dirname "$0")/.."
tessera=${TESSERA_BIN:-build/bin/tessera}
[ -x "$tessera" ] || { echo "bench_hbm: $tessera not built (cmake --build build --target tessera)" >&2; exit 1; }
traces="$out/traces"
mkdir -p "$traces"
scale=${BENCH_HBM_SCALE:-1}

# gen WORKLOAD CHANNELS FILE: writes the trace (deterministic: a Park-Miller generator).
gen() {
  local w=$1 c=$2 f=$3
  awk -v w="$w" -v c="$c" -v scale="$scale" 'BEGIN {
    cap = c * 268435456; x = 12345 + c
    if (w == "stream_read" || w == "stream_write") {
      n = int(200000 * c * scale); cmd = (w == "stream_read") ? "READ" : "WRITE"
      for (i = 0; i < n; i++) printf "0x%x %s 0\n", 32 * i, cmd
    } else if (w == "mix_2r1w") {
      n = int(300000 * c * scale); r = 0; wr = cap / 2
      for (i = 0; i < n; i++) {
        if (i % 3 == 2) { printf "0x%x WRITE 0\n", wr; wr += 32 }
        else { printf "0x%x READ 0\n", r; r += 32 }
      }
    } else if (w == "random_2r1w") {
      n = int(40000 * c * scale)
      for (i = 0; i < n; i++) {
        x = (x * 16807) % 2147483647
        printf "0x%x %s 0\n", (x % (cap / 32)) * 32, (i % 3 == 2) ? "WRITE" : "READ"
      }
    } else if (w == "random_read_32" || w == "random_read_64" || w == "unloaded_read") {
      b = (w == "random_read_64") ? 64 : 32
      n = int((w == "unloaded_read" ? 1000 : (b == 64 ? 25000 : 40000) * c) * scale)
      for (i = 0; i < n; i++) {
        x = (x * 16807) % 2147483647
        printf "0x%x READ %d\n", (x % (cap / b)) * b, (w == "unloaded_read") ? 200 * i : 0
      }
    }
  }' > "$f"
}

# field JSON KEY: a value from the tool's one-line JSON object.
field() { sed -E "s/.*\"$2\": ([^,}]*).*/\1/" <<<"$1"; }

rows=()
row() {  # row NAME VALUE UNIT WORKLOAD CHANNELS
  rows+=("{\"name\": \"$1\", \"value\": $2, \"unit\": \"$3\", \"params\": {\"workload\": \"$4\", \"channels\": $5}}")
}

printf '%-15s %3s %9s %8s %8s %9s %9s %8s %8s %7s\n' workload ch requests cycles 'GB/s' \
  '% peak' 'lat avg' 'lat p99' 'row hit' 'wall s'
for w in stream_read stream_write mix_2r1w random_read_32 random_read_64 random_2r1w unloaded_read; do
  for c in 1 2 4 8 16; do
    f="$traces/${w}_c$c.trc"
    gen "$w" "$c" "$f"
    bytes=32; [ "$w" = random_read_64 ] && bytes=64
    start=$(date +%s.%N)
    json=$("$tessera" hbm-replay "$f" --json --channels "$c" --request-bytes "$bytes") ||
      { echo "bench_hbm: hbm-replay failed on $f" >&2; exit 1; }
    wall=$(printf '%.2f' "$(echo "$(date +%s.%N) - $start" | bc)")
    echo "$json" > "$out/hbm_${w}_c$c.json"
    bw=$(field "$json" bandwidth_gbps); pct=$(field "$json" percent_of_peak)
    avg=$(field "$json" avg_read_latency_cycles); p99=$(field "$json" p99_read_latency_cycles)
    hit=$(field "$json" row_hit_rate); cyc=$(field "$json" cycles); req=$(field "$json" requests)
    ref=$(field "$json" refresh_cycles)
    if [ "$w" != unloaded_read ]; then
      row hbm_bandwidth_gbps "$bw" GB/s "$w" "$c"
      row hbm_bandwidth_percent_of_peak "$pct" % "$w" "$c"
      row hbm_row_hit_rate "$hit" fraction "$w" "$c"
      row hbm_unused_acts "$(field "$json" unused_acts)" count "$w" "$c"
      row hbm_refresh_cycles "$ref" cycles "$w" "$c"
    fi
    if [ "$avg" != null ]; then
      row hbm_read_latency_avg_cycles "$avg" cycles "$w" "$c"
      row hbm_read_latency_p99_cycles "$p99" cycles "$w" "$c"
    fi
    row hbm_sim_cycles "$cyc" cycles "$w" "$c"
    row hbm_sim_wall_s "$wall" s "$w" "$c"
    if [ "$avg" = null ]; then avg=-; p99=-; else avg=$(printf '%.1f' "$avg"); fi
    printf '%-15s %3s %9s %8s %8.2f %9.2f %9s %9s %8.4f %7.1f\n' "$w" "$c" "$req" "$cyc" "$bw" \
      "$pct" "$avg" "$p99" "$hit" "$wall"
  done
done
{
  echo "["
  for i in "${!rows[@]}"; do
    sep=","; [ "$i" -eq $(( ${#rows[@]} - 1 )) ] && sep=""
    echo "  ${rows[$i]}$sep"
  done
  echo "]"
} > "$out/hbm.json"
echo "results: $out/hbm.json"
