#!/bin/sh
# Measures the build IDs of short-lived processes' live MMAP2 records in
# a whole-host synth record (issue 56, part 2), as root:
#
#   measure.sh SYNTH [N]
#
#   1. N (default 150) distinct programs, built with gcc, each run once:
#      how many of their live MMAP2 records carry a build ID, and how
#      many of those are not the program's own (readelf -n);
#   2. a loop of 2,000 /bin/true: how many MMAP2 records of
#      /usr/bin/true carry a build ID, and whether it is readelf's;
#   3. a 10 s loop of /bin/true beside a synth record under strace: how
#      many times synth opened libc.so.6 to read it (O_PATH opens, which
#      read nothing, counted apart).
set -eu
synth=$(realpath "$1")
n=${2:-150}
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$repo" && go build -o "$dir/mmapids" ./testdata/buildidshort/mmapids)
cd "$dir"

idof() { readelf -n "$1" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p'; }

# mmaps FILE PATH: the MMAP2 records of PATH in FILE, a line each:
# "PID ID", ID "-" when the record is of the maj/min/ino form. Read with
# the repository's reader (mmapids): perf 6.1 stops at a KSYMBOL record
# the kernel grew (issue 56, part 3), and leaves records out.
mmaps() {
	"$dir/mmapids" "$1" | awk -v path="$2" '$3 == path { print $1, $2 }'
}

echo "== $n programs, each run once"
i=0
while [ $i -lt "$n" ]; do
	printf 'int main(void) { return %d - %d; }\n' $i $i >p$i.c
	gcc -O1 -o p$i p$i.c
	i=$((i + 1))
done
"$synth" record -q -a -o progs.data -- sh -c "i=0; while [ \$i -lt $n ]; do ./p\$i; i=\$((i + 1)); done"
with=0 without=0 wrong=0
i=0
while [ $i -lt "$n" ]; do
	want=$(idof p$i)
	mmaps progs.data "$dir/p$i" >recs
	while read -r pid id; do
		if [ "$id" = - ]; then without=$((without + 1))
		elif [ "$id" = "$want" ]; then with=$((with + 1))
		else wrong=$((wrong + 1)); echo "p$i: $id, want $want"
		fi
	done <recs
	i=$((i + 1))
done
echo "records with the program's own build ID: $with; without: $without; wrong: $wrong"

echo "== 2,000 /bin/true"
"$synth" record -q -a -o true.data -- sh -c 'for i in $(seq 2000); do /bin/true; done'
want=$(idof /usr/bin/true)
mmaps true.data /usr/bin/true | awk -v want="$want" '
	$2 == want { w++ } $2 == "-" { wo++ } $2 != want && $2 != "-" { bad++ }
	END { printf "MMAP2 of /usr/bin/true with its build ID: %d; without: %d; wrong: %d\n", w, wo, bad }'

echo "== opens of libc.so.6 in a 10 s /bin/true loop"
# The loop runs beside synth, not as its workload, whose own ld.so opens
# libc; strace follows synth's threads and the processes it starts
# (its workload, sleep, which execve tells apart, and a mapread helper).
# synth reads a file through /proc/PID/map_files or, by its name, with
# openat2: its ld.so's open of libc, and the directories of the build-ID
# cache (~/.debug/.../libc.so.6/), are not counted.
sh -c 'end=$(($(date +%s) + 12)); while [ $(date +%s) -lt $end ]; do /bin/true; done' &
loop=$!
strace -ff -qq -y -e trace=openat,openat2,execve -o st "$synth" record -q -a -o loop.data -- sleep 10
wait $loop
# One file a thread (-ff): no call split in two; the workload's files
# have an execve of another program than synth.
for f in st.*; do
	grep 'execve(' "$f" | grep -qv "execve(\"$synth\"" || cat "$f"
done | awk '/libc\.so\.6>$/ && (/map_files/ || /openat2\(/) { if (/O_PATH/) s++; else r++ }
	END { printf "synth opened libc.so.6 to read it: %d times; O_PATH (stat, no read): %d\n", r, s }'
echo "/bin/true runs recorded: $(mmaps loop.data /usr/bin/true | wc -l)"
