# Helpers of the VM tests that snapshot and migrate (snapshot.sh, migrate.sh): start a
# writing guest under a control socket, read fields of replies, check a zipfbench run
# against a native one. Sourced after the caller set S (its directory); the VM's RAM
# (SMEM), zipfbench's arguments (ZARGS), the control socket (SOCK) and STOP are set here.
SMEM=$(scaled 256 64)M
ZARGS=(--size "$(scaled 64 8)M" --report-ms 0 --seed 11 --scatter)
SOCK=$S/ctl.sock
STOP=$S/stop

start_vm() { # SOCK, then command; sets VMPID. Its stdin is a FIFO the test holds open
	local sock=$1       # (fd 6) until vm_stdin_close, so a guest may wait for it.
	shift
	rm -f "$S/in"; mkfifo "$S/in"
	"$CCVM" run --mem "$SMEM" --control "$sock" -- "$@" <"$S/in" >"$S/vm.out" 2>"$S/vm.err" &
	VMPID=$!
	exec 6>"$S/in"
	wait_until 10 test -S "$sock"
}
vm_stdin_close() { exec 6>&-; }
vm_stop() { # touch $STOP and close the guest's stdin; wait for it: its status
	touch "$STOP"
	vm_stdin_close
	wait "$VMPID"
}
field() { grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2- | tr -d '"'; }
flip_byte() { # FILE OFFSET: every bit of the byte inverted (writing a constant would
	# leave a byte that already held it, such as an LZ4 frame's 0xff lengths, as it was)
	python3 -c 'import os, sys; fd, o = os.open(sys.argv[1], os.O_RDWR), int(sys.argv[2])
os.pwrite(fd, bytes([os.pread(fd, 1, o)[0] ^ 0xff]), o)' "$1" "$2"
}
image_memory_equals_ref() { # IMAGE: the memory the image holds (read by ccvm's reader,
	# build/imgmem: frames decompressed, each chunk checked) vs IMAGE.ref
	local ram; ram=$(stat -c %s "$1.ref")
	"$TOP/build/imgmem" "$1" | head -c "$ram" | cmp -s - "$1.ref"
}
zcheck() { # FILE [ZIPFBENCH ARGS]: FILE's summary line matches a native run of as many
	local line n want     # updates (default args: ZARGS); prints "updates=N checksum=X"
	line=$(grep '^summary ' "$1" 2>/dev/null | tail -1)
	shift
	[ $# -gt 0 ] || set -- "${ZARGS[@]}"
	n=$(echo "$line" | grep -o ' updates=[0-9]*' | cut -d= -f2)
	[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "no summary: '$line'"; return 1; }
	want=$("$G/zipfbench" "$@" --report-ms 0 --write-total "$((n * 1024))" | grep -o 'checksum=[0-9a-f]*')
	echo "$line" | grep -q " $want\$" || { echo "'$line', a native run of $n updates ends with $want"; return 1; }
	echo "updates=$n $want"
}
reports() { grep -c '^report ' "$S/vm.out" 2>/dev/null; }
more_reports() { [ "$(reports)" -gt "$1" ]; } # N: the guest reported progress since
tracker_timed() { # SOCK: the coverage tracker has timed a window by the guest's progress
	awk -v r="$("$CCVM" ctl "$1" stats regions 2>/dev/null | field progress_per_s)" 'BEGIN {exit !(r > 0)}'
}
wait_rewrite_window() { # SOCK: the coverage tracker measured a window of rewrites
	# Windows are timed by the guest's clock reads, which zipfbench makes only once its
	# area is filled: the window after the first so timed watched nothing but rewrites.
	local w
	wait_until 60 tracker_timed "$1"
	w=$("$CCVM" ctl "$1" stats regions 2>/dev/null | field windows)
	wait_until 60 vm_field_ge "$1" stats regions windows $((${w:-0} + 1))
}
vm_field_ge() { # SOCK CMD... FIELD MIN: a number in the reply is at least MIN
	local n=$(($# - 1)) min=${!#} f
	f=${!n}
	[ "$("$CCVM" ctl "${@:1:$((n - 1))}" 2>/dev/null | field "$f")" -ge "$min" ] 2>/dev/null
}

