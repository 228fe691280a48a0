#!/usr/bin/env bash
# expect.sh SECONDS PATTERN-FILE -- COMMAND...: runs COMMAND (an mpirun line), then checks that
# it ended within SECONDS and that its output matches every extended regex in PATTERN-FILE (one
# per line; "!re" must NOT match). Prints the output on failure. The distributed fault tests use
# it: what matters there is what each rank printed and how soon the job ended, not mpirun's status.
set -u
limit="$1"; patterns="$2"; shift 3
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout -k 5 $((limit + 30)) "$@" >"$out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
fail=0
while IFS= read -r re; do
  [ -z "$re" ] && continue
  if [ "${re:0:1}" = "!" ]; then
    if grep -Eq -- "${re:1}" "$out"; then echo "expect: must not match: ${re:1}"; fail=1; fi
  elif ! grep -Eq -- "$re" "$out"; then
    echo "expect: no line matches: $re"; fail=1
  fi
done <"$patterns"
if [ "$took" -gt "$limit" ]; then echo "expect: took $took s, more than $limit s"; fail=1; fi
if [ $fail -ne 0 ]; then echo "---- output (status $rc, $took s):"; cat "$out"; exit 1; fi
echo "expect: ok ($took s, status $rc)"
