#!/bin/bash
# scripts/fuzz.sh — libFuzzer runs of the wire codec (Sources/StoreKitWire).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, the default targets)
#        scripts/fuzz.sh --regenerate-corpus                 (rewrites Fuzz/corpus/ from real encodings)
#
# Targets (harness sources in Fuzz/, one libFuzzer binary each):
#   client-message  ClientMessage.decode on arbitrary bodies; what decodes must re-encode to the
#                   same bytes (the encoding is canonical).
#   server-message  ServerMessage.decode, same properties (the client library and storekitctl).
#   frame-decoder   FrameDecoder fed a stream in fuzzer-chosen pieces through both `append`
#                   overloads, compared with a one-pass reference decoder; every body goes through
#                   ClientMessage.decode, as in the daemon's read loop.
#   record-json     the `-o json` rendering (TransactionRecord.json, ProductRecord.json, RFC3339)
#                   of every record a ServerMessage decodes to; must never trap.
#
# How it works: the harness and Sources/StoreKitWire/*.swift are compiled together into one module
# with `swiftc -parse-as-library -sanitize=fuzzer,address -O` (falling back to -sanitize=fuzzer if
# AddressSanitizer does not link), so Package.swift is untouched. A harness exports
# LLVMFuzzerTestOneInput with @_cdecl. Binaries are rebuilt only when a source changed.
#
# Files: seeds in Fuzz/corpus/<target>/ (checked in; written by Fuzz/GenerateCorpus.swift);
# everything else under $FUZZ_DIR (default .build/fuzz): bin/, corpus/<target>/ (what the fuzzer
# found, kept between runs), artifacts/<target>/ (crash inputs), logs/<target>.log.
# Inputs in Fuzz/crashes/<target>/ are replayed first, as regression tests, and must not crash.
#
# Exit status: 0 clean; 1 a target crashed, leaked, timed out or ran out of memory (the input's
# path and a command to reproduce it are printed — copy the input into Fuzz/crashes/<target>/ to keep
# it); 2 usage or build error.
#
# Environment: SWIFTC (default: swiftc on PATH, else /opt/swift/usr/bin/swiftc), FUZZ_DIR,
# FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=2 -workers=2").
set -uo pipefail
SCRIPT=$(readlink -f "$0")
cd "$(dirname "$SCRIPT")/.."

DEFAULT_TARGETS=(client-message server-message frame-decoder record-json)
FUZZ_DIR=${FUZZ_DIR:-.build/fuzz}
SWIFTC=${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}
TOOLBIN=$(dirname "$(readlink -f "$SWIFTC")")
# A Swift runtime backtracer forked at a crash can outlive libFuzzer's exit and keep our output
# pipes open; libFuzzer and ASan print their own stack traces.
export SWIFT_BACKTRACE=enable=no
[ -x "$TOOLBIN/llvm-symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$TOOLBIN/llvm-symbolizer"

source_of() {
    case "$1" in
        client-message) echo Fuzz/FuzzClientMessage.swift ;;
        server-message) echo Fuzz/FuzzServerMessage.swift ;;
        frame-decoder) echo Fuzz/FuzzFrameDecoder.swift ;;
        record-json) echo Fuzz/FuzzRecordJSON.swift ;;
        *) return 1 ;;
    esac
}

seeds_of() {
    case "$1" in
        record-json) echo Fuzz/corpus/server-message ;;
        *) echo "Fuzz/corpus/$1" ;;
    esac
}

die() { echo "fuzz.sh: $*" >&2; exit 2; }

# Compiles Sources/StoreKitWire/*.swift with the given extra files into $2; $1 = sanitizer list or "".
compile() {
    local sanitize=$1 output=$2; shift 2
    local flags=(-parse-as-library -swift-version 6 -O -module-name FuzzWire -use-ld=lld)
    [ -n "$sanitize" ] && flags+=("-sanitize=$sanitize")
    "$SWIFTC" "${flags[@]}" Sources/StoreKitWire/*.swift "$@" -o "$output"
}

if [ "${1:-}" = "--regenerate-corpus" ]; then
    mkdir -p "$FUZZ_DIR/bin" || die "cannot create $FUZZ_DIR"
    compile "" "$FUZZ_DIR/bin/generate-corpus" Fuzz/GenerateCorpus.swift || die "building the corpus generator failed"
    rm -rf Fuzz/corpus/client-message Fuzz/corpus/server-message Fuzz/corpus/frame-decoder
    "$FUZZ_DIR/bin/generate-corpus" Fuzz/corpus || die "the corpus generator failed"
    for dir in Fuzz/corpus/*/; do echo "$dir: $(find "$dir" -type f | wc -l) seeds"; done
    exit 0
fi

SECONDS_PER_TARGET=${1:-60}
[[ "$SECONDS_PER_TARGET" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]"
shift $(( $# > 0 ? 1 : 0 ))
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${DEFAULT_TARGETS[@]}")
for target in "${TARGETS[@]}"; do source_of "$target" >/dev/null || die "unknown target '$target'"; done
[ -x "$SWIFTC" ] || die "swiftc not found (set SWIFTC)"

mkdir -p "$FUZZ_DIR/bin" "$FUZZ_DIR/logs" || die "cannot create $FUZZ_DIR"

# libFuzzer with AddressSanitizer if this toolchain links it, else libFuzzer alone (probed once
# per toolchain; the answer is cached in $FUZZ_DIR/bin/sanitize).
if [ -s "$FUZZ_DIR/bin/sanitize" ] && [ "$FUZZ_DIR/bin/sanitize" -nt "$SWIFTC" ]; then
    SANITIZE=$(cat "$FUZZ_DIR/bin/sanitize")
else
    SANITIZE=fuzzer,address
    probe="$FUZZ_DIR/bin/.probe"
    if ! compile "$SANITIZE" "$probe" Fuzz/FuzzClientMessage.swift >"$FUZZ_DIR/logs/build-probe.log" 2>&1; then
        if compile fuzzer "$probe" Fuzz/FuzzClientMessage.swift >"$FUZZ_DIR/logs/build-probe.log" 2>&1; then
            echo "fuzz.sh: AddressSanitizer does not link with libFuzzer here; fuzzing without it" >&2
            SANITIZE=fuzzer
        else
            cat "$FUZZ_DIR/logs/build-probe.log" >&2
            die "swiftc -sanitize=fuzzer does not work with $SWIFTC (libclang_rt.fuzzer missing?)"
        fi
    fi
    rm -f "$probe"
    echo "$SANITIZE" >"$FUZZ_DIR/bin/sanitize"
fi

# Build what is missing or older than its sources, in parallel.
pids=()
for target in "${TARGETS[@]}"; do
    binary="$FUZZ_DIR/bin/fuzz-$target"
    stamp="$FUZZ_DIR/bin/fuzz-$target.sanitize"
    if [ -x "$binary" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$SANITIZE" ] \
        && [ -z "$(find Sources/StoreKitWire "$(source_of "$target")" "$SCRIPT" -newer "$binary" -print -quit)" ]; then
        continue
    fi
    ( compile "$SANITIZE" "$binary" "$(source_of "$target")" >"$FUZZ_DIR/logs/build-$target.log" 2>&1 \
        && echo "$SANITIZE" >"$stamp" ) &
    pids+=("$!:$target")
done
for entry in "${pids[@]}"; do
    if ! wait "${entry%%:*}"; then
        cat "$FUZZ_DIR/logs/build-${entry#*:}.log" >&2
        die "building fuzz-${entry#*:} failed"
    fi
done

status=0
report() {  # target, log, artifacts...
    local target=$1 log=$2; shift 2
    status=1
    echo "FAIL $target: see $log"
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*Fatal error|.*[Ee]rror:)" "$log" | head -5 | sed 's/^/    /'
    for artifact in "$@"; do
        echo "    crash input: $artifact"
        echo "    reproduce:   SWIFT_BACKTRACE=enable=no $FUZZ_DIR/bin/fuzz-$target $artifact"
    done
}

for target in "${TARGETS[@]}"; do
    binary="$FUZZ_DIR/bin/fuzz-$target"
    log="$FUZZ_DIR/logs/$target.log"
    artifacts="$FUZZ_DIR/artifacts/$target"
    corpus="$FUZZ_DIR/corpus/$target"
    mkdir -p "$artifacts" "$corpus"

    # Regression inputs kept from earlier crashes.
    if compgen -G "Fuzz/crashes/$target/*" >/dev/null; then
        if ! "$binary" -runs=1 Fuzz/crashes/"$target"/* >"$FUZZ_DIR/logs/$target-regression.log" 2>&1; then
            failing=()
            for input in Fuzz/crashes/"$target"/*; do
                "$binary" -runs=1 "$input" >/dev/null 2>&1 || failing+=("$input")
            done
            report "$target" "$FUZZ_DIR/logs/$target-regression.log" "${failing[@]}"
            continue
        fi
    fi

    marker="$FUZZ_DIR/logs/.start-$target"
    touch "$marker"
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    timeout --kill-after=10 $((SECONDS_PER_TARGET + 120)) "$binary" "$corpus" "$(seeds_of "$target")" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} >"$log" 2>&1
    rc=$?
    mapfile -t found < <(find "$artifacts" -type f -newer "$marker" \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
    rm -f "$marker"
    if [ $rc -ne 0 ] || [ ${#found[@]} -gt 0 ]; then
        [ $rc -eq 124 ] && echo "FAIL $target: did not stop after -max_total_time"
        report "$target" "$log" "${found[@]}"
        continue
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
    echo "ok   $target: ${runs:-?} inputs in ${SECONDS_PER_TARGET}s, $coverage (-sanitize=$SANITIZE)"
done
exit $status
