#!/usr/bin/env bash
# The net path side by side with each transport's own tools, in one run, on loopback: for the built-in
# socket net, net-ucx (UCX_TLS=tcp) and net-ofi (FI_PROVIDER=tcp), the point-to-point bandwidth of the
# plugin one way and both ways at once (plexus-net-check's table), the transport's own benchmark
# (ucx_perftest tag_bw, fi_pingpong),
# and the bus bandwidth of AllReduce and of a point-to-point exchange (plexus-perf sendrecv) between 2 "nodes" of 1
# rank each (PLEXUS_HOSTID) through the plugin.
#   scripts/bench-net.sh [bytes=64M]
# Environment: BUILD_DIR (./build), ITERS (10), REPEAT (3: AllReduce runs this many times and the median busbw
# is shown; on this 2-core VM one run of 2 processes at 64 MiB lands anywhere between 1.1 and 1.7 GB/s).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
bytes=${1:-64M}
iters=${ITERS:-10}
repeat=${REPEAT:-3}
[[ $repeat =~ ^[1-9][0-9]?$ ]] || { echo "bench-net: REPEAT must be an integer from 1 to 99, not '$repeat'" >&2; exit 2; }
export NCCL_SOCKET_IFNAME=lo PLEXUS_PLUGIN_PATH=$PWD/$build/lib/plexus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$((30000 + $$ % 20000))

# One-way and both-ways-at-once bandwidth (GB/s, per direction) of plexus-net-check's table at 4 MiB.
p2p() { "$build/bin/plexus-net-check" "$1" --rule table -b 4M -e 4M -n 50 -t 60 2>&1 |
          awk '$1 == 4194304 { print $3, $4 }'; }
coll() {  # median busbw (GB/s) of collective $2 in $repeat runs at $bytes, 2 nodes of 1 rank, NCCL_NET_PLUGIN=$1
  local k
  for ((k = 0; k < repeat; k++)); do
    port=$((port + 1))
    for r in 0 1; do
      NCCL_NET_PLUGIN=$1 NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=2 PLEXUS_HOSTID=bench-node$r \
        timeout 300 "$build/bin/plexus-perf" "$2" -b "$bytes" -e "$bytes" -n "$iters" -w 2 -c 0 >"$tmp/ar.$r" 2>&1 &
    done
    wait
    awk '$1 ~ /^[0-9]+$/ { print $8 }' "$tmp/ar.0" | tail -1
  done | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
ucxRef() {
  port=$((port + 1))
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 60 ucx_perftest -p $port >/dev/null 2>&1 &
  sleep 1
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 60 ucx_perftest 127.0.0.1 -p $port -t tag_bw -s 4194304 -n 500 2>&1 |
    awk '/^Final:/ { printf "%.2f\n", $7 / 1000 * 1.048576 }'
  wait
}
ofiRef() {
  FI_TCP_IFACE=lo timeout 60 fi_pingpong -p tcp -e rdm -m tagged -S 4194304 -I 200 >/dev/null 2>&1 &
  sleep 1
  FI_TCP_IFACE=lo timeout 60 fi_pingpong -p tcp -e rdm -m tagged -S 4194304 -I 200 127.0.0.1 2>&1 |
    awk '$1 == "4m" { printf "%.2f\n", $6 / 1000 * 1.048576 }'
  wait
}

printf "%-8s %-6s %8s %8s %-27s %6s %10s %6s %6s %9s %6s\n" net plugin "oneway" "bidir" reference "ref" "allreduce" \
  "/1way" "/bidir" "sendrecv" "/bidir"
row() {
  local name=$1 spec=$2 ref=$3 refbw=$4
  local bw ar sr one bi
  bw=$(p2p "$spec")
  one=${bw% *}
  bi=${bw#* }
  ar=$(coll "$spec" all_reduce)
  sr=$(coll "$spec" sendrecv)
  ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
  printf "%-8s %-6s %8s %8s %-27s %6s %10s %6s %6s %9s %6s\n" "$name" "$spec" "${one:-?}" "${bi:-?}" "$ref" \
    "${refbw:--}" "${ar:-?}" "$(ratio "$ar" "$one")" "$(ratio "$ar" "$bi")" "${sr:-?}" "$(ratio "$sr" "$bi")"
}
row socket socket "(TCP: socket unit test)" ""
[[ -f $PLEXUS_PLUGIN_PATH/libnccl-net-ucx.so ]] &&
  UCX_TLS=tcp UCX_NET_DEVICES=lo row ucx-tcp ucx "ucx_perftest tag_bw 4 MiB" "$(ucxRef)"
[[ -f $PLEXUS_PLUGIN_PATH/libnccl-net-ofi.so ]] &&
  FI_PROVIDER=tcp FI_TCP_IFACE=lo row ofi-tcp ofi "fi_pingpong tagged 4 MiB" "$(ofiRef)"
echo "# GB/s. oneway/bidir: the plugin between 2 processes at 4 MiB (bidir: both directions at once, per direction);"
echo "# ref: the transport's own tool, one way, 4 MiB; allreduce, sendrecv: busbw at $bytes, 2 nodes of 1 rank, over"
echo "# the plugin (median of $repeat runs); /1way, /bidir: over the plugin's figures (2 ranks: busbw is what each"
echo "# direction carries while both are busy, so /bidir is the net path's share of what the plugin itself reaches)"
