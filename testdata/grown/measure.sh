#!/bin/bash
# usage: testdata/grown/measure.sh SYNTH N DIR [extra record args]
# Measures issue 56 part 3: N recordings (synth record -q -a -F 20000 -- sleep 3)
# while three synth dumps load their programs in a loop beside, each read
# by perf script and perf report (how many refused), then, with ksz (the
# repository's reader), how much each KSYMBOL, BPF_EVENT or TEXT_POKE
# record exceeds its true size. DIR must exist or is made.
mkdir -p "$3"
BIN=$(realpath "$1"); N=$2; DIR=$3; shift 3
repo=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$repo" && go build -o "$DIR/ksz" ./testdata/grown/ksz)

refused_s=0; refused_r=0
for i in $(seq 1 $N); do
  pids=()
  for j in 1 2 3; do
    ( while :; do $BIN dump -o /dev/null >/dev/null 2>&1; done ) &
    pids+=($!)
  done
  sleep 0.3
  $BIN record -q -a -F 20000 "$@" -o $DIR/f$i.data -- sleep 3 >/dev/null 2>$DIR/rec$i.err
  for p in "${pids[@]}"; do kill $p; done
  wait 2>/dev/null
  perf script -i $DIR/f$i.data >/dev/null 2>$DIR/script$i.err; rs=$?
  perf report -i $DIR/f$i.data --stdio >/dev/null 2>$DIR/report$i.err; rr=$?
  if [ $rs -ne 0 ] || grep -q 'failed to process' $DIR/script$i.err; then refused_s=$((refused_s+1)); fi
  if [ $rr -ne 0 ] || grep -q 'failed to process' $DIR/report$i.err; then refused_r=$((refused_r+1)); fi
  echo "run $i: script rc=$rs report rc=$rr script: $(grep -h "failed to process" $DIR/script$i.err | head -1) report: $(grep -h "failed to process" $DIR/report$i.err | head -1)"
done
echo "refused: script $refused_s/$N report $refused_r/$N"
"$DIR/ksz" "$DIR"/f*.data
