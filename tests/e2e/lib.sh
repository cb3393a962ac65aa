# What every end-to-end script shares; sourced by run.sh before the others.
#
# A check ends in pass, fail or skip under a NAME that does not change from run to run
# (no figures, ports or paths in it: those go in the detail), so that two runs, on
# /dev/kvm and nested under TCG, can be compared check by check. With E2E_RESULTS set,
# each outcome is also appended to that file as "ok|FAIL|skip<TAB>NAME<TAB>REASON".
#
# Two knobs make the suite fit a slow machine without weakening a single assertion:
#   E2E_SCALE     percent (1-100, default 100) of the full workloads: guest RAM, data
#                 sizes, records, iterations. Every check asserts the same thing at
#                 every scale: exact images, the native run's output, exit codes.
#   E2E_PATIENCE  a factor (default 1) on the bounds that only catch a hang (and on
#                 the one bound of the same kind a check hands ccvm, the eager
#                 pre-copy's pause budget). Checks do not wait for time to pass: each
#                 waits for its event (a line, a file, a snapshot's reply) and gives up
#                 only at such a bound.

E2E_SCALE=${E2E_SCALE:-100}
E2E_PATIENCE=${E2E_PATIENCE:-1}
case $E2E_SCALE in
[1-9] | [1-9][0-9] | 100) ;;
*) echo "e2e: E2E_SCALE=$E2E_SCALE: a percent of the full workloads, 1 to 100" >&2; exit 2 ;;
esac
case $E2E_PATIENCE in
[1-9] | [1-9][0-9]) ;;
*) echo "e2e: E2E_PATIENCE=$E2E_PATIENCE: a whole factor on hang bounds, 1 to 99" >&2; exit 2 ;;
esac
PASS=0 FAIL=0 SKIP=0
SKIPPED=()

E2E_LAST=$(date +%s)
e2e_record() { # OUTCOME NAME [REASON]; E2E_RESULTS.times: seconds since the last check
	local now
	[ -n "${E2E_RESULTS:-}" ] || return 0
	printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$E2E_RESULTS"
	now=$(date +%s)
	printf '%s\t%s\n' "$((now - E2E_LAST))" "$2" >>"$E2E_RESULTS.times"
	E2E_LAST=$now
}

pass() { # NAME [DETAIL]: the figures a passing check saw go in DETAIL
	PASS=$((PASS + 1))
	echo "ok   $1${2:+: $2}"
	e2e_record ok "$1"
}

fail() { # NAME [LINE...]: what was seen instead, a line each
	local name=$1 l
	FAIL=$((FAIL + 1))
	echo "FAIL $name"
	shift
	for l in "$@"; do echo "     $l"; done
	e2e_record FAIL "$name"
}

skip() { # NAME REASON: a check that cannot run here, said by name
	SKIP=$((SKIP + 1))
	SKIPPED+=("$1: $2")
	echo "skip $1: $2"
	e2e_record skip "$1" "$2"
}

# Under run.sh --only parsing, guest.sh and snapshot.sh run only their blocks that drive
# the monitor's parsing of what a guest or an image hands it; the rest is guarded so.
full_suite() { [ "${ONLY:-}" != parsing ]; }

scaled() { # N [MIN]: N at E2E_SCALE percent, at least MIN (default 1)
	local v=$(($1 * E2E_SCALE / 100)) min=${2:-1}
	[ "$v" -ge "$min" ] || v=$min
	echo "$v"
}

bound() { # SECONDS: a hang bound, times E2E_PATIENCE
	echo $(($1 * E2E_PATIENCE))
}

tmo() { # SECONDS COMMAND...: the command, killed (status 124) past the hang bound
	local s=$1
	shift
	timeout "$(bound "$s")" "$@"
}

json_str() { # NAME: the first string after "NAME": in the JSON on stdin
	sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -1
}
json_num() { # NAME: the first number after "NAME": in the JSON on stdin
	grep -o "\"$1\": *[0-9]*" | head -1 | grep -o '[0-9]*$'
}

wait_until() { # SECONDS COMMAND...: poll the command until it succeeds; 1 past the bound
	local end=$(($(date +%s) + $(bound "$1")))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.05
	done
}

gone() { ! kill -0 "$1" 2>/dev/null; } # PID: the process has ended

has_line() { grep -q -- "$1" "$2" 2>/dev/null; } # PATTERN FILE

wait_for_line() { wait_until 60 has_line "$1" "$2"; } # PATTERN FILE

expect_fail() { # NAME STATUS PATTERN -- COMMAND...
	local name=$1 want=$2 pat=$3
	shift 4
	tmo 20 "$@" >/dev/null 2>"$WORK/bad.err" </dev/null
	local st=$?
	if [ "$st" = "$want" ] && grep -q -- "$pat" "$WORK/bad.err"; then
		pass "$name" "status $st, '$(grep -o -- "$pat.*" "$WORK/bad.err" | head -1 | cut -c1-70)'"
	else
		fail "$name" "status $st (want $want)" "$(head -3 "$WORK/bad.err")"
	fi
}

e2e_closing() { # the skipped checks by name, then the closing line; status: none failed
	local s
	for s in "${SKIPPED[@]}"; do echo "skipped: $s"; done
	echo "$PASS passed, $FAIL failed, $SKIP skipped"
	[ "$FAIL" = 0 ]
}
