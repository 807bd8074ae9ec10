#!/bin/bash
# scripts/fuzz-requests.sh — the `requests` target (Sources/storekitd-fuzz) under libFuzzer:
# decoded client and control requests through the engine and the store on a temporary
# database, with invariants checked after each request (see RequestHarness.swift).
#
# Usage: scripts/fuzz-requests.sh [SECONDS]   (default 600)
# Built with `swift build --sanitize=fuzzer -DSTOREKIT_LIBFUZZER` in its own scratch path
# ($FUZZ_DIR/spm, default .build/fuzz/spm), so the normal build is untouched. The corpus grows in
# $FUZZ_DIR/corpus/requests; crash inputs go to $FUZZ_DIR/artifacts/requests/ and are printed
# with the command that replays them (the plain `storekitd-fuzz FILE` replays one too; keep one
# in Fuzz/crashes/requests/ to make it a regression input, replayed first on every run).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
SECONDS_TO_RUN=${1:-600}
FUZZ_DIR=${FUZZ_DIR:-.build/fuzz}
export SWIFT_BACKTRACE=enable=no
mkdir -p "$FUZZ_DIR/logs" "$FUZZ_DIR/corpus/requests" "$FUZZ_DIR/artifacts/requests"
if ! swift build -c release --sanitize=fuzzer -Xswiftc -DSTOREKIT_LIBFUZZER --scratch-path "$FUZZ_DIR/spm" \
        --product storekitd-fuzz >"$FUZZ_DIR/logs/build-requests.log" 2>&1; then
    cat "$FUZZ_DIR/logs/build-requests.log" >&2
    echo "fuzz-requests.sh: build failed" >&2
    exit 2
fi
binary="$FUZZ_DIR/spm/release/storekitd-fuzz"
if compgen -G "Fuzz/crashes/requests/*" >/dev/null; then
    "$binary" -runs=1 Fuzz/crashes/requests/* >"$FUZZ_DIR/logs/requests-regression.log" 2>&1 \
        || { echo "FAIL requests: a kept crash input crashes again (see $FUZZ_DIR/logs/requests-regression.log)"; exit 1; }
fi
log="$FUZZ_DIR/logs/requests.log"
timeout --kill-after=10 $((SECONDS_TO_RUN + 120)) "$binary" "$FUZZ_DIR/corpus/requests" \
    -max_total_time="$SECONDS_TO_RUN" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_DIR/artifacts/requests/" ${FUZZ_ARGS:-} >"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
if [ $rc -ne 0 ]; then
    echo "FAIL requests: see $log"
    grep -E "invariant broken|Fatal error|SUMMARY" "$log" | head -5 | sed 's/^/    /'
    for input in $(find "$FUZZ_DIR/artifacts/requests" -type f -newer "$FUZZ_DIR/logs/build-requests.log"); do
        echo "    crash input: $input"
        echo "    reproduce:   .build/debug/storekitd-fuzz $input"
    done
    exit 1
fi
echo "ok   requests: ${runs:-?} inputs in ${SECONDS_TO_RUN}s, $coverage"
