#!/bin/bash
# scripts/test-system.sh — the Debian package on a real Debian 12 booted with systemd as PID 1.
#
# Usage: scripts/test-system.sh            (run by `make test-system` and by .ci/run, as root)
# Environment: DEBS=DIR   test the packages in DIR instead of building them with `make deb`
#              KEEP=1     keep the work directory (rootfs, logs) for inspection
#
# Builds the packages (`make deb`: storekitd, libstorekit0, libstorekit-dev, python3-storekit,
# storekit-examples), makes a Debian 12 rootfs with debootstrap (the pristine rootfs is cached as a
# tarball in /var/cache/storekitd-test-system/, keyed by the package list), installs storekitd and
# storekit-examples with dpkg inside it (the library and Python packages are installed later, once
# booted, as an app developer would, and timed to the C example's first purchase), adds two unprivileged users (uid 1000 and 1001), boots it with
# systemd-nspawn and checks, as those users, what the units, the polkit rule and the daemon promise.
# The shipped files are used unmodified: the test adds no drop-ins. Each check prints one line,
# "PASS: what <evidence>" or "FAIL: what <evidence>"; the last line is "N passed, N failed", and the
# exit status is non-zero when anything failed. Where the test cannot run (not root, no
# systemd-nspawn or debootstrap, no cgroup of its own) it prints "SKIP: reason" and exits 0.
#
# Safety. A systemd manager started in the host's own cgroup takes over every process of the
# machine. So, as in ../shared/TESTING.md ("A real systemd"): the launching shell first moves into
# cgroups of its own, systemd-nspawn runs with --register=no --keep-unit --private-network, only the
# throwaway rootfs is booted, nothing is created under the host's /run/systemd. Commands run inside
# with `nsenter -t LEADER -a`. Only processes this script started are signalled, by pid. On any exit
# the container is powered off and the cgroups are removed (trap).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

PASSED=0
FAILED=0
pass() { echo "PASS: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP: $*"; exit 0; }
note() { echo "  .. $*"; }
# check NAME EVIDENCE COMMAND...: PASS when COMMAND succeeds, FAIL otherwise, with the evidence.
check() { local name=$1 evidence=$2; shift 2; if "$@"; then pass "$name: $evidence"; else fail "$name: $evidence"; fi; }

[ "$(id -u)" = 0 ] || skip "test-system needs root (debootstrap, chroot, systemd-nspawn); run: sudo make test-system"
for tool in debootstrap systemd-nspawn nsenter chroot python3 dpkg-deb; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (make test-system installs debootstrap and systemd-container)"
done
# The cgroups the launching shell moves into: the named v1 hierarchy and the unified one (hybrid
# layout, as on these machines), or the unified one alone (pure cgroup v2).
CG=storekitd-test-system-$$
if [ -d /sys/fs/cgroup/systemd ] && [ -d /sys/fs/cgroup/unified ]; then
    CGROUPS=(/sys/fs/cgroup/systemd/$CG /sys/fs/cgroup/unified/$CG)
elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    CGROUPS=(/sys/fs/cgroup/$CG)
else
    skip "no cgroup hierarchy to give the container a cgroup of its own"
fi

START=$(date +%s)
SUITE=bookworm
# sqlite3: the command-line shell operations.md's restore and salvage steps use.
# python3, gcc, libc6-dev, pkgconf, libssl3: what python3-storekit needs and what an app developer
# has to build the C example (the container has no network to fetch them).
INCLUDE=systemd,systemd-sysv,dbus,libsystemd0,libsqlite3-0,libpq5,procps,polkitd,pkexec,libnss-systemd,libpam-systemd,sqlite3,python3,gcc,libc6-dev,pkgconf,libssl3
CACHE=/var/cache/storekitd-test-system
WORK=$(mktemp -d /var/tmp/storekitd-test-system.XXXXXX)
ROOTFS=$WORK/rootfs
NSPAWN=""
LEADER=""
OBSERVER_HOST_PID=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$LEADER" ] && [ -e "/proc/$LEADER" ]; then
        nsenter -t "$LEADER" -a systemctl poweroff >/dev/null 2>&1 || true
    fi
    if [ -n "$NSPAWN" ]; then
        for _ in $(seq 1 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$NSPAWN" 2>/dev/null; then
            echo "container did not power off in 10 s; terminating systemd-nspawn (pid $NSPAWN)"
            kill -TERM "$NSPAWN" 2>/dev/null
            for _ in $(seq 1 50); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$NSPAWN" 2>/dev/null || true
        fi
        wait "$NSPAWN" 2>/dev/null || true
    fi
    if [ -n "$OBSERVER_HOST_PID" ] && kill -0 "$OBSERVER_HOST_PID" 2>/dev/null; then
        kill -TERM "$OBSERVER_HOST_PID" 2>/dev/null || true
    fi
    # The container's systemd made its own cgroups below ours: remove them deepest first.
    for dir in "${CGROUPS[@]}"; do
        [ -d "$dir" ] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$dir" ] && echo "warning: could not remove cgroup $dir"
    done
    if [ "${KEEP:-0}" = 1 ]; then
        echo "kept $WORK"
    else
        rm -rf --one-file-system "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------------
# The packages.
if [ -z "${DEBS:-}" ]; then
    echo "== make deb"
    make --no-print-directory deb >"$WORK/deb.log" 2>&1 || { tail -40 "$WORK/deb.log"; fail "make deb: see the log above"; exit 1; }
    DEBS=dist
fi
VERSION=$(dpkg-parsechangelog -S Version)
declare -A PKG
for name in storekitd libstorekit0 libstorekit-dev python3-storekit storekit-examples; do
    PKG[$name]=$(ls "$DEBS/${name}_${VERSION}"_*.deb 2>/dev/null | head -1)
    [ -f "${PKG[$name]}" ] || { fail "package: no $DEBS/${name}_${VERSION}_*.deb"; exit 1; }
    note "$(basename "${PKG[$name]}"): $(stat -c %s "${PKG[$name]}") bytes, $(dpkg-deb -f "${PKG[$name]}" Installed-Size) KiB installed; Depends: $(dpkg-deb -f "${PKG[$name]}" Depends)"
done
DEB=${PKG[storekitd]}
size=$(dpkg-deb -f "$DEB" Installed-Size)
check "the storekitd package is at most 30 MB installed" "$size KiB ($((size * 1024 / 1000000)) MB)" [ "$size" -le 29296 ]
if command -v lintian >/dev/null; then
    lintian "${PKG[@]}" >"$WORK/lintian.log" 2>&1
    errors=$(grep -c '^E:' "$WORK/lintian.log")
    check "lintian reports no errors (all five packages)" "$errors errors, $(grep -c '^W:' "$WORK/lintian.log") warnings" [ "$errors" = 0 ]
    grep -E '^(E|W):' "$WORK/lintian.log" | sed 's/^/  .. /'
fi
mkdir -p "$WORK/pkg"
dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$WORK/pkg" ./usr/bin/storekitd
hooks_status=0
hooks=$("$WORK/pkg/usr/bin/storekitd" --enable-test-hooks 2>&1) || hooks_status=$?
check "the packaged storekitd has no test hooks: --enable-test-hooks is an unknown option" \
    "exit $hooks_status: $(echo "$hooks" | head -1)" [ "$hooks_status" = 64 ]

# ---------------------------------------------------------------------------------------------
# The rootfs: debootstrap once, then from the cached tarball.
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
KEY=$(echo "$SUITE minbase $INCLUDE" | sha256sum | cut -c1-16)
TARBALL=$CACHE/rootfs-$SUITE-$KEY.tar
mkdir -p "$ROOTFS" "$CACHE"
if [ -f "$TARBALL" ]; then
    echo "== rootfs from $TARBALL"
    tar -C "$ROOTFS" --numeric-owner -xpf "$TARBALL" || { fail "rootfs: cannot unpack $TARBALL"; exit 1; }
else
    echo "== debootstrap $SUITE from $MIRROR (cached afterwards in $CACHE)"
    if ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
        tail -20 "$WORK/debootstrap.log"
        skip "debootstrap of $SUITE from $MIRROR failed (no access to the Debian mirror?)"
    fi
    rm -f "$CACHE"/rootfs-*.tar
    tar -C "$ROOTFS" --numeric-owner -cpf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
fi

echo "== install $(basename "$DEB") and $(basename "${PKG[storekit-examples]}"), add users"
cp "$DEB" "$ROOTFS/tmp/storekitd.deb"
cp "${PKG[storekit-examples]}" "$ROOTFS/tmp/storekit-examples.deb"
mkdir -p "$ROOTFS/var/tmp/app-packages"
cp "${PKG[libstorekit0]}" "${PKG[libstorekit-dev]}" "${PKG[python3-storekit]}" "$ROOTFS/var/tmp/app-packages/"
if ! chroot "$ROOTFS" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        dpkg -i /tmp/storekitd.deb /tmp/storekit-examples.deb >"$WORK/dpkg.log" 2>&1 </dev/null; then
    cat "$WORK/dpkg.log"
    fail "dpkg -i in a clean Debian 12: exit status non-zero (log above)"
    exit 1
fi
pass "dpkg -i in a clean Debian 12: $(grep -c . "$WORK/dpkg.log") lines of output, $(chroot "$ROOTFS" dpkg-query -W -f='${Package} ${Version} ${Status}; ' storekitd storekit-examples)"
chroot "$ROOTFS" useradd -m -u 1000 -s /bin/bash alice
chroot "$ROOTFS" useradd -m -u 1001 -s /bin/bash bob
mkdir -p "$ROOTFS/var/log/journal"

# ---------------------------------------------------------------------------------------------
# Boot, from cgroups of our own.
echo "== boot"
BOOT_START=$(date +%s)
mkdir -p "${CGROUPS[@]}"
procs=""
for dir in "${CGROUPS[@]}"; do procs="$procs echo \$\$ > $dir/cgroup.procs;"; done
setsid sh -c "$procs exec systemd-nspawn -q -D '$ROOTFS' -M sk-test-$$ --register=no --keep-unit --boot \
    --console=pipe --private-network --link-journal=no" </dev/null >"$WORK/nspawn.log" 2>&1 &
NSPAWN=$!
# The leader: the child of systemd-nspawn that is systemd and has its private socket.
for _ in $(seq 1 300); do
    for child in $(cat /proc/"$NSPAWN"/task/*/children 2>/dev/null); do
        if [ "$(cat /proc/"$child"/comm 2>/dev/null)" = systemd ] && [ -e "/proc/$child/root/run/systemd/private" ]; then
            LEADER=$child
        fi
    done
    [ -n "$LEADER" ] && break
    kill -0 "$NSPAWN" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$LEADER" ]; then
    cat "$WORK/nspawn.log"
    fail "boot: no systemd leader in 30 s"
    exit 1
fi

IN() { nsenter -t "$LEADER" -a "$@"; }
# AS UID COMMAND...: COMMAND inside, as UID with its own groups and a clean environment.
AS() {
    local uid=$1 home
    shift
    home=$(IN getent passwd "$uid" | cut -d: -f6)
    IN env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 setpriv --reuid="$uid" --regid="$uid" --init-groups -- "$@"
}
MAINPID() { IN systemctl show -p MainPID --value storekitd.service; }
# signal SIG PID: kill -SIG PID inside, only for one real process (never 0, 1 or a group: `kill 0`
# would signal this script's own process group).
signal() {
    if [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -gt 1 ]; then
        IN kill -"$1" "$2"
    else
        note "not sending SIG$1 to '$2' (no such process)"
        return 1
    fi
}
NOW() { IN date +%s; }
# json EXPR < JSON: evaluates a Python expression over the parsed input `d` (or `lines`, a list of
# the parsed JSON lines when the input is one object per line) and prints the result.
json() {
    python3 -c '
import json, sys
text = sys.stdin.read()
try:
    d = json.loads(text)
except ValueError:
    d = None
lines = []
for line in text.splitlines():
    try:
        lines.append(json.loads(line))
    except ValueError:
        pass
print(eval(sys.argv[1]))' "$1"
}
# wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.2
    done
}
# A transaction's record from `storekitctl transactions -o json`, as JSON (or "null").
transaction() {
    IN storekitctl -o json transactions | json "json.dumps(next((t for t in (d or []) if t.get('transactionIdentifier') == '$1'), None))"
}
finished() { [ "$(IN storekitctl -o json transactions | json "any(t.get('transactionIdentifier') == '$1' and t.get('finished') is True for t in (d or []))")" = True ]; }
unfinished() {
    IN storekitctl -o json transactions --unfinished "$@" | json "len(d or [])"
}

state=$(IN systemctl is-system-running --wait 2>&1)
note "booted in $(($(date +%s) - BOOT_START)) s: system $state"
if [ "$state" != running ]; then
    IN systemctl --failed --no-legend | sed 's/^/  .. failed unit: /'
fi

# ---------------------------------------------------------------------------------------------
echo "== a. sockets enabled and listening, service socket-activated only"
enabled=$(IN systemctl is-enabled storekitd.socket storekitd-control.socket storekitd.service | tr '\n' ' ')
listen=$(IN systemctl show -p Listen --value storekitd.socket storekitd-control.socket | grep . | tr '\n' ' ')
active=$(IN systemctl is-active storekitd.socket storekitd-control.socket | tr '\n' ' ')
sockets_ok() {
    [ "$enabled" = "enabled enabled static " ] && [ "$active" = "active active " ] &&
        IN test -S /run/storekitd/storekitd.sock && IN test -S /run/storekitd/control.sock
}
check "a. sockets enabled and listening, service not enabled" \
    "is-enabled socket/control/service: $enabled; is-active: $active; Listen: $listen$(IN ls -l /run/storekitd | awk 'NR > 1 {printf "; %s %s:%s %s", $1, $3, $4, $NF}')" \
    sockets_ok
rundir() { IN stat -c '%a %U:%G %n' /run/storekitd; }
rundir_ok() { [ "$(IN stat -c %a /run/storekitd)" = 755 ] && ! IN test -e /run/private/storekitd; }
check "a. /run/storekitd is 0755 and not under /run/private" "$(rundir); /run/private/storekitd $(IN test -e /run/private/storekitd && echo exists || echo absent)" rundir_ok

# ---------------------------------------------------------------------------------------------
echo "== b. uid 1000 buys and finishes, before and after a restart of the service"
buy_as_alice() {
    local out=$WORK/buy-$1.out
    if ! AS 1000 timeout 60 storekit-example-app buy com.example.game.coins100 >"$out" 2>"$WORK/buy-$1.err"; then
        note "buy exit status non-zero; stderr: $(head -c 400 "$WORK/buy-$1.err" | tr "\n" " ")" >&2
    fi
    json "next((l['transactionIdentifier'] for l in lines if l.get('event') == 'updated' and l.get('state') == 'purchased'), '')" <"$out"
}
TX1=$(buy_as_alice 1)
pid1=$(MAINPID)
check "b. uid 1000 buys com.example.game.coins100 (first start of the daemon)" \
    "transaction ${TX1:-none}: $(transaction "$TX1" | json "d and (d['uid'], d['state'], 'finished=%s' % d['finished'])"); MainPID $pid1; $(rundir)" \
    finished "$TX1"
IN systemctl restart storekitd.service
pid2=$(MAINPID)
TX2=$(buy_as_alice 2)
check "b. uid 1000 buys again after systemctl restart storekitd.service" \
    "MainPID $pid1 -> $pid2; transaction ${TX2:-none}: $(transaction "$TX2" | json "d and (d['uid'], d['state'], 'finished=%s' % d['finished'])"); $(rundir)" \
    eval 'finished "$TX2" && rundir_ok && [ "$pid1" != "$pid2" ]'
# The app granted them only after validating its receipt against the root the daemon published;
# now that both consumables are finished, the receipt no longer lists them (as Apple's).
AS 1000 storekit-example-app validate-receipt >"$WORK/receipt.out" 2>&1 || true
receipt_ok() {
    json "lines and lines[-1].get('valid') is True and lines[-1].get('transactions') == []" <"$WORK/receipt.out" | grep -q True &&
        [ "$(IN stat -c '%a %U' /var/lib/storekitd/root-certificate.pem)" = "644 storekitd" ] &&
        [ "$(IN stat -c '%a' /var/lib/storekitd/signing)" = 700 ]
}
check "b. uid 1000's app receipt validates against /var/lib/storekitd/root-certificate.pem (its finished consumables no longer listed)" \
    "$(tail -c 300 "$WORK/receipt.out"); $(IN stat -c '%a %U %n' /var/lib/storekitd /var/lib/storekitd/root-certificate.pem /var/lib/storekitd/signing | tr '\n' ' ')" \
    receipt_ok
# The StoreKit 2 sample, from the package too: a level pack bought with Product.purchase(), its
# signed transaction verified against the published root, then granted.
AS 1000 timeout 60 storekit2-example-app buy com.example.game.level_pack >"$WORK/sk2.out" 2>&1 || true
sk2_ok() {
    json "any(l.get('event') == 'purchase' and l.get('result') == 'success' and l.get('verified') is True for l in lines) and lines[-1].get('levelPacks') == ['com.example.game.level_pack']" \
        <"$WORK/sk2.out" | grep -q True
}
check "b. uid 1000's StoreKit 2 app (storekit2-example-app) buys a level pack, verifies its signed transaction, grants it" "$(tail -c 400 "$WORK/sk2.out" | tr '\n' ' ')" sk2_ok
# The level pack's hosted content, read by the sandboxed daemon from /etc/storekitd/content and
# passed as descriptors: restoring it, the StoreKit 1 app downloads it into uid 1000's cache
# before it finishes the restored transaction.
AS 1000 timeout 60 storekit-example-app restore >"$WORK/restore-content.out" 2>"$WORK/restore-content.err" || true
CONTENT=$(IN getent passwd 1000 | cut -d: -f6)/.cache/storekit/com.example.game/downloads/com.example.game.level_pack
content_ok() {
    json "any(l.get('event') == 'download' and l.get('state') == 'finished' for l in lines) and any(l.get('event') == 'removed' and l.get('state') == 'restored' for l in lines)" \
        <"$WORK/restore-content.out" | grep -q True &&
        IN diff -r /etc/storekitd/content/level_pack "$CONTENT/Contents" >/dev/null &&
        [ "$(IN stat -c %u "$CONTENT/Contents/README.txt")" = 1000 ]
}
check "b. uid 1000's app restores the level pack and downloads its hosted content (from /etc/storekitd/content through the hardened unit) before it finishes" \
    "$(grep '"download"' "$WORK/restore-content.out" | tail -n 1 | head -c 300); $(head -c 300 "$WORK/restore-content.err" | tr '\n' ' '); $(IN ls -l "$CONTENT/Contents" 2>&1 | tr '\n' ' ' | head -c 300)" \
    content_ok

# ---------------------------------------------------------------------------------------------
echo "== c. journal fields and catalog text"
IN journalctl --sync 2>/dev/null || true
IN journalctl -t storekitd STOREKIT_APP=com.example.game STOREKIT_TRANSACTION_ID="$TX1" -o json >"$WORK/journal-c.json"
fields=$(json "sorted(set((l.get('STOREKIT_STATE') or '-') for l in lines))" <"$WORK/journal-c.json")
entry=$(json "next(('STOREKIT_TRANSACTION_ID=%s STOREKIT_APP=%s STOREKIT_UID=%s STOREKIT_STATE=%s MESSAGE_ID=%s' % (l['STOREKIT_TRANSACTION_ID'], l['STOREKIT_APP'], l.get('STOREKIT_UID'), l.get('STOREKIT_STATE'), l.get('MESSAGE_ID')) for l in lines if l.get('STOREKIT_STATE') == 'purchased'), '')" <"$WORK/journal-c.json")
check "c. journalctl -t storekitd STOREKIT_APP=com.example.game -o json carries the fields" \
    "$(json 'len(lines)' <"$WORK/journal-c.json") entries for $TX1, states $fields; $entry" [ -n "$entry" ]
catalog=$(IN journalctl -x -t storekitd STOREKIT_TRANSACTION_ID="$TX1" --no-pager | grep -m1 -A1 "changed state to" | tr -s ' \n' ' ')
check "c. journalctl -x shows the catalog text" "${catalog:-no catalog text}" [ -n "$catalog" ]

# ---------------------------------------------------------------------------------------------
echo "== d. kill -9 of the daemon: restarted, a connected observer keeps its connection"
start_observer() {
    IN sh -c 'echo $$ > /run/storekitd-test-observer.pid; home=$(getent passwd 1000 | cut -d: -f6);
        exec env -i PATH=/usr/bin:/bin HOME=$home LANG=C.UTF-8 setpriv --reuid=1000 --regid=1000 --init-groups -- storekit-example-app observe' \
        >"$WORK/observer.out" 2>"$WORK/observer.err" </dev/null &
    OBSERVER_HOST_PID=$!
}
observer_pid() { IN cat /run/storekitd-test-observer.pid 2>/dev/null; }
observer_alive() { local p; p=$(observer_pid); [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -gt 1 ] && IN kill -0 "$p" 2>/dev/null; }
observers_connected() { IN storekitctl -o json status | json "d.get('observers', 0)"; }
# observer_got TX: the observer printed TX purchased and then removed (finished).
observer_got() {
    [ "$(json "any(l.get('event') == 'updated' and l.get('state') == 'purchased' and l.get('transactionIdentifier') == '$1' for l in lines) and any(l.get('event') == 'removed' and l.get('transactionIdentifier') == '$1' for l in lines)" <"$WORK/observer.out")" = True ]
}
buy_for() { IN storekitctl -o json buy com.example.game "$2" --uid "$1" | json "(d or {}).get('transactionIdentifier', '')"; }
start_observer
wait_for 20 eval '[ "$(observers_connected)" -ge 1 ] 2>/dev/null' || note "status does not show an observer: $(IN storekitctl -o json status)"
opid=$(observer_pid)
pid1=$(MAINPID)
signal KILL "$pid1"
wait_for 20 eval '[ "$(MAINPID)" != "$pid1" ] && [ "$(MAINPID)" != 0 ] && [ "$(IN systemctl is-active storekitd.service)" = active ]'
pid2=$(MAINPID)
TX3=$(buy_for 1000 com.example.game.level_pack)
wait_for 20 observer_got "$TX3"
check "d. kill -9: systemd restarts the daemon; the observer stays connected and finishes the next purchase" \
    "MainPID $pid1 -> $pid2 (NRestarts=$(IN systemctl show -p NRestarts --value storekitd.service)); observer pid $opid alive=$(observer_alive && echo yes || echo no); $TX3 purchased+removed in its output: $(observer_got "$TX3" && echo yes || echo no); unfinished of uid 1000: $(unfinished --uid 1000)" \
    eval '[ "$pid1" != "$pid2" ] && [ "$pid2" != 0 ] && observer_alive && [ "$(observer_pid)" = "$opid" ] && observer_got "$TX3" && [ "$(unfinished --uid 1000)" = 0 ]'

# ---------------------------------------------------------------------------------------------
echo "== e. SIGSTOP: the watchdog restarts the daemon"
pid1=$(MAINPID)
since=$(NOW)
signal STOP "$pid1"
t0=$(date +%s.%N)
wait_for 120 eval '[ "$(MAINPID)" != "$pid1" ] && [ "$(MAINPID)" != 0 ] && [ "$(IN systemctl is-active storekitd.service)" = active ]'
t1=$(date +%s.%N)
pid2=$(MAINPID)
watchdog=$(IN journalctl -u storekitd.service --since "@$since" --no-pager -o cat | grep -m1 "Watchdog timeout")
TX4=$(buy_for 1000 com.example.game.coins100)
wait_for 20 observer_got "$TX4"
check "e. SIGSTOP: watchdog timeout, new MainPID; the observer survives that restart too" \
    "MainPID $pid1 -> $pid2 after $(python3 -c "print(round($t1 - $t0, 1))") s; journal: '${watchdog:-no Watchdog timeout}'; observer got $TX4: $(observer_got "$TX4" && echo yes || echo no)" \
    eval '[ "$pid1" != "$pid2" ] && [ -n "$watchdog" ] && observer_got "$TX4"'

# ---------------------------------------------------------------------------------------------
echo "== f. reload with a bad configuration keeps the old one"
pid1=$(MAINPID)
IN cp /etc/storekitd/storekitd.conf /run/storekitd-test.conf.orig
IN sh -c 'echo "NoSuchKey=1" >> /etc/storekitd/storekitd.conf'
since=$(NOW)
IN systemctl reload storekitd.service
sleep 1
reload=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat | grep -i -m1 "reload" | cut -c1-200)
TX5=$(buy_as_alice 5)
check "f. systemctl reload with a bad key: old configuration kept, still serving" \
    "journal: '${reload:-no reload message}'; MainPID $pid1 -> $(MAINPID); state $(IN systemctl is-active storekitd.service); uid 1000 bought and finished ${TX5:-nothing}" \
    eval '[ "$(MAINPID)" = "$pid1" ] && [ "$(IN systemctl is-active storekitd.service)" = active ] && finished "$TX5" && echo "$reload" | grep -qi "fail\|kept\|keep"'
IN cp /run/storekitd-test.conf.orig /etc/storekitd/storekitd.conf
since=$(NOW)
IN systemctl reload storekitd.service
sleep 1
note "restored; journal: $(IN journalctl -t storekitd --since "@$since" --no-pager -o cat | grep -i -m1 "reload" | cut -c1-200)"

# The observer of uid 1000 is done: stop it (it runs inside, started by this script).
signal TERM "$(observer_pid)" 2>/dev/null
wait "$OBSERVER_HOST_PID" 2>/dev/null
OBSERVER_HOST_PID=""

# ---------------------------------------------------------------------------------------------
echo "== g. an update for a uid with no observer starts that uid's observer instance"
# What an admin does: copy the model template, name it in the app's registration (storekit-example-app
# acts as com.example.game, so the registration naming its observer is com.example.game's), reload.
UNIT=storekit-example-app-observer@1001.service
IN cp /usr/share/doc/storekit-examples/examples/storekit-example-app-observer@.service /etc/systemd/system/
# Into the [App] section (the file goes on with the level pack's [HostedContent]).
IN sed -i 's|^\[App\]$|[App]\n# The observer, started per buyer uid.\nObserverUnit=storekit-example-app-observer@.service|' /etc/storekitd/apps.d/com.example.game.conf
IN systemctl daemon-reload
IN systemctl reload storekitd.service
before=$(IN systemctl is-active "$UNIT")
since=$(NOW)
TX6=$(buy_for 1001 com.example.game.coins100)
wait_for 30 eval '[ "$(IN systemctl is-active "$UNIT")" = active ] && finished "$TX6"'
show=$(IN systemctl show -p ActiveState,User,MainPID "$UNIT" | tr '\n' ' ')
opid=$(IN systemctl show -p MainPID --value "$UNIT")
ouid=$(IN sh -c "awk '/^Uid:/{print \$2}' /proc/$opid/status 2>/dev/null")
ledger=$(IN cat /var/lib/storekit-example-app/1001/storekit-example-app/com.example.game.ledger 2>/dev/null | grep -c "^$TX6 ")
activation=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat MESSAGE_ID=6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6c | head -2 | cut -c1-200 | tr '\n' '|')
check "g. storekitctl buy --uid 1001 with no observer: storekitd starts $UNIT, which finishes it as uid 1001" \
    "before: $before; after: $show; process uid $ouid; $TX6 finished=$(finished "$TX6" && echo yes || echo no), in uid 1001's ledger: $ledger; journal: ${activation:-no activation message}" \
    eval '[ "$before" != active ] && [ "$(IN systemctl is-active "$UNIT")" = active ] && [ "$ouid" = 1001 ] && finished "$TX6"'
if ! finished "$TX6"; then
    IN journalctl --since "@$since" --no-pager -o short-monotonic | grep -i -E "storekit|polkit|observer" | tail -12 | sed 's/^/  .. /'
fi

echo "== g. the polkit rule grants the daemon's user exactly that"
# systemctl --no-ask-password as the user: polkit's answer is the error (or the lack of one).
as_user_systemctl() {
    local user=$1
    shift
    IN setpriv --reuid="$user" --regid="$user" --clear-groups -- systemctl --no-ask-password "$@" 2>&1 | head -1
}
granted=$(as_user_systemctl storekitd start storekit-example-app-observer@1000.service)
granted_state=$(IN systemctl show -p ActiveState,User storekit-example-app-observer@1000.service | tr '\n' ' ')
IN systemctl stop storekit-example-app-observer@1000.service
stop=$(as_user_systemctl storekitd stop "$UNIT")
other=$(as_user_systemctl storekitd start nosuch-observer@1000.service)
plain=$(as_user_systemctl storekitd start dbus.service)
alice=$(as_user_systemctl 1000 start storekit-example-app-observer@1000.service)
# Root's and a system account's instances: the polkit rule asks storekitd --verify-observer-unit,
# which refuses uids outside UID_MIN…UID_MAX of /etc/login.defs.
asroot=$(as_user_systemctl storekitd start storekit-example-app-observer@0.service)
system=$(as_user_systemctl storekitd start storekit-example-app-observer@999.service)
highest=$(as_user_systemctl storekitd start storekit-example-app-observer@4294967295.service)
root_state=$(IN systemctl show -p ActiveState --value storekit-example-app-observer@0.service)
denied() { case "$1" in *"Interactive authentication required"* | *"Access denied"*) return 0 ;; *) return 1 ;; esac; }
check "g. polkit: storekitd may start registered observer instances only; nothing else, nobody else" \
    "storekitd start ...@1000: '${granted:-ok}' ($granted_state); storekitd stop $UNIT: '$stop'; storekitd start nosuch-observer@1000.service: '$other'; storekitd start dbus.service: '$plain'; uid 1000 start ...@1000: '$alice'" \
    eval '[ -z "$granted" ] && denied "$stop" && denied "$other" && denied "$plain" && denied "$alice" && IN systemctl -q is-active "$UNIT"'
check "g. polkit: no observer as root or a system account (@0, @999, @4294967295 refused)" \
    "storekitd start ...@0: '$asroot' (ActiveState=$root_state); ...@999: '$system'; ...@4294967295: '$highest'" \
    eval 'denied "$asroot" && denied "$system" && denied "$highest" && [ "$root_state" != active ]'

# ---------------------------------------------------------------------------------------------
echo "== h. stop everything, start the client socket: both sockets are back"
IN systemctl stop storekitd.service storekitd.socket storekitd-control.socket
left=$(IN sh -c 'ls -A /run/storekitd 2>/dev/null' | tr '\n' ' ')
IN systemctl start storekitd.socket
active=$(IN systemctl is-active storekitd.socket storekitd-control.socket | tr '\n' ' ')
status=$(IN timeout 30 storekitctl -o json status 2>&1)
check "h. stop all, start storekitd.socket: no stale files, both sockets listen, storekitctl status works" \
    "after stop /run/storekitd holds: '${left}'; after start is-active: $active; status: $(echo "$status" | tr -d '\n' | cut -c1-160)" \
    eval '[ -z "$left" ] && [ "$active" = "active active " ] && echo "$status" | json "isinstance(d, dict)" | grep -q True'

# ---------------------------------------------------------------------------------------------
echo "== k. an upgrade (the package installed over itself) restarts the daemon only: no call refused or reset"
# The booted system's /tmp is its own: the package goes where the container sees it.
cp "$DEB" "$ROOTFS/var/tmp/storekitd.deb"
IN storekitctl status >/dev/null 2>&1
pid1=$(MAINPID)
socket1=$(IN systemctl show -p ActiveEnterTimestampMonotonic --value storekitd.socket storekitd-control.socket | tr '\n' ' ')
# Four loops of storekitctl calls, from a second before the upgrade to a second after it.
IN rm -f /run/storekitd-test-calls.*
for loop in 1 2 3 4; do
    IN sh -c 'while [ ! -e /run/storekitd-test-upgraded ]; do
        if storekitctl status >/dev/null 2>>/run/storekitd-test-calls.err; then echo ok; else echo failed; fi; done;
        sleep 1; for i in 1 2 3 4 5 6 7 8 9 10; do storekitctl status >/dev/null 2>>/run/storekitd-test-calls.err && echo ok || echo failed; done' \
        >>"$WORK/calls-$loop.out" 2>&1 &
    eval "CALLS_$loop=\$!"
done
sleep 1
IN env DEBIAN_FRONTEND=noninteractive dpkg -i /var/tmp/storekitd.deb >"$WORK/upgrade.log" 2>&1 </dev/null
upgrade_status=$?
IN touch /run/storekitd-test-upgraded
wait "$CALLS_1" "$CALLS_2" "$CALLS_3" "$CALLS_4"
calls_ok=$(cat "$WORK"/calls-*.out | grep -c '^ok$')
calls_failed=$(cat "$WORK"/calls-*.out | grep -c '^failed$')
socket2=$(IN systemctl show -p ActiveEnterTimestampMonotonic --value storekitd.socket storekitd-control.socket | tr '\n' ' ')
pid2=$(MAINPID)
check "k. dpkg -i over the installed package: sockets never closed, the daemon restarted, every storekitctl call answered" \
    "dpkg exit status $upgrade_status$( [ $upgrade_status = 0 ] || echo " ($(tail -2 "$WORK/upgrade.log" | tr '\n' ' '))"); sockets active since $socket1-> $socket2; MainPID $pid1 -> $pid2; calls: $calls_ok ok, $calls_failed failed$(IN sh -c 'sort /run/storekitd-test-calls.err 2>/dev/null | uniq -c | head -3' | tr '\n' ' ' | sed 's/^./; errors: &/')" \
    eval '[ $upgrade_status = 0 ] && [ "$socket1" = "$socket2" ] && [ "$pid1" != "$pid2" ] && [ "$pid2" != 0 ] && [ "$calls_failed" = 0 ] && [ "$calls_ok" -ge 40 ]'
IN rm -f /run/storekitd-test-upgraded /run/storekitd-test-calls.err

# ---------------------------------------------------------------------------------------------
echo "== l. restore a backup (operations.md §3), step by step"
STATE=/var/lib/storekitd
TXB=$(buy_for 1000 com.example.game.level_pack)
IN storekitctl backup $STATE/backup.sqlite >"$WORK/backup.out" 2>&1
TXA=$(buy_for 1000 com.example.game.coins100)
# 1. Check the backup.
integrity=$(IN sqlite3 $STATE/backup.sqlite 'PRAGMA integrity_check')
# 2. Stop the daemon and its sockets.
IN systemctl stop storekitd.socket storekitd-control.socket storekitd.service
# 3. The backup in place of the database, owned by storekitd, 0600; the WAL and its index removed.
IN sh -c "cd $STATE && mv storekitd.sqlite storekitd.sqlite.old && rm -f storekitd.sqlite-wal storekitd.sqlite-shm &&
    install -o storekitd -g storekitd -m 0600 backup.sqlite storekitd.sqlite"
# 5. Start the sockets again; the next connection starts the daemon.
since=$(NOW)
IN systemctl start storekitd.socket
IN storekitctl status >/dev/null 2>&1
IN journalctl --sync 2>/dev/null || true
opened=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat | grep -m1 "Opened database" | cut -c1-160)
errors=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat -p err | grep -c .)
restored_notice=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat -p notice | grep -c "another database")
kept=$(IN sh -c "ls $STATE | grep -c '\.kept-'")
restore_ok() {
    [ "$integrity" = ok ] && [ -n "$TXB" ] && [ -n "$TXA" ] && [ "$(transaction "$TXB")" != null ] && [ "$(transaction "$TXA")" = null ] &&
        echo "$opened" | grep -q "schema 3" && [ "$errors" = 0 ] && [ "$restored_notice" = 1 ] && [ "$kept" = 2 ]
}
check "l. restore: integrity_check ok, the backup's purchase is there and the later one is not; the journal says schema 3 and, once, that the old commit log was kept" \
    "integrity_check: $integrity; before the backup $TXB: $(transaction "$TXB" | json "d and d['state']"); after it $TXA: $(transaction "$TXA" | json "d and d['state']"); journal: '$opened'; $errors error lines, $restored_notice notice about the old log; $kept .kept- files" \
    restore_ok

echo "== l. salvage a damaged database (operations.md §5), step by step"
# Damage: the one page of an index (its root page) overwritten, as a bad sector would.
IN systemctl stop storekitd.socket storekitd-control.socket storekitd.service
# Everything in the main file first, so that the damaged page is the only copy of it.
IN sqlite3 $STATE/storekitd.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
root=$(IN sqlite3 $STATE/storekitd.sqlite "SELECT rootpage FROM sqlite_master WHERE name = 'transactions_queue'")
size=$(IN sqlite3 $STATE/storekitd.sqlite 'PRAGMA page_size')
IN dd if=/dev/urandom of=$STATE/storekitd.sqlite bs="$size" seek=$((root - 1)) count=1 conv=notrunc status=none
damaged=$(IN sqlite3 $STATE/storekitd.sqlite 'PRAGMA integrity_check' 2>&1 | head -1)
# The steps, as written: the damaged files aside, .dump, COMMIT what was read, the two pragmas.
IN sh -c "cd $STATE && mkdir damaged && mv storekitd.sqlite storekitd.sqlite-* damaged/ 2>/dev/null;
    mv damaged/storekitd.sqlite-reserve . ; sqlite3 damaged/storekitd.sqlite .dump > salvage.sql;
    sed -i 's/^ROLLBACK; -- due to errors\$/COMMIT;/' salvage.sql && sqlite3 recovered.sqlite < salvage.sql &&
    sqlite3 recovered.sqlite 'PRAGMA application_id=1397444932; PRAGMA user_version=3; PRAGMA integrity_check' > salvage.check &&
    install -o storekitd -g storekitd -m 0600 recovered.sqlite storekitd.sqlite"
salvaged=$(IN cat $STATE/salvage.check 2>&1)
since=$(NOW)
IN systemctl start storekitd.socket
TXS=$(buy_for 1000 com.example.game.coins100)
errors=$(IN journalctl -t storekitd --since "@$since" --no-pager -o cat -p err | grep -c .)
salvage_ok() {
    [ "$damaged" != ok ] && [ "$salvaged" = ok ] && [ "$(transaction "$TXB")" != null ] && [ -n "$TXS" ] && [ "$(transaction "$TXS")" != null ] && [ "$errors" = 0 ]
}
check "l. salvage: the damaged database's rows come back through .dump; the daemon opens the result and takes new purchases" \
    "damaged: '$damaged'; recovered integrity_check: '$salvaged'; $TXB: $(transaction "$TXB" | json "d and d['state']"); new purchase ${TXS:-none}: $(transaction "$TXS" | json "d and d['state']"); $errors error lines" \
    salvage_ok

# ---------------------------------------------------------------------------------------------
echo "== m. an app developer: the library packages installed, the C example built and run by uid 1000, the Python example by uid 1001"
# From installed files only: the examples' sources from storekit-examples, the header and
# pkg-config module from libstorekit-dev, the module from python3-storekit. The clock runs from
# the installation of the library packages to the C example's first purchase (apt, as a developer
# types it; the rootfs already has every dependency, and the container has no network).
m_start=$(date +%s.%N)
IN sh -c 'env DEBIAN_FRONTEND=noninteractive apt-get install -y /var/tmp/app-packages/*.deb' >"$WORK/apt-m.log" 2>&1 </dev/null
apt_status=$?
installer=apt-get
if [ "$apt_status" != 0 ]; then
    note "apt-get install failed ($(grep -m1 '^E:' "$WORK/apt-m.log")); dpkg -i instead"
    installer="dpkg -i"
    IN sh -c 'env DEBIAN_FRONTEND=noninteractive dpkg -i /var/tmp/app-packages/*.deb' >>"$WORK/apt-m.log" 2>&1 </dev/null
    apt_status=$?
fi
m_installed=$(date +%s.%N)
IN sh -c 'mkdir -p /home/alice/c && cp /usr/share/doc/storekit-examples/examples/c/buy-and-finish.c /home/alice/c/ && chown -R alice: /home/alice/c'
AS 1000 sh -c 'cd ~/c && cc -std=c11 -Wall -Werror buy-and-finish.c $(pkg-config --cflags --libs storekit) -o buy-and-finish' >"$WORK/cc-m.log" 2>&1
cc_status=$?
m_built=$(date +%s.%N)
AS 1000 timeout 60 /home/alice/c/buy-and-finish com.example.game com.example.game.coins100 >"$WORK/c-m.out" 2>"$WORK/c-m.err"
c_status=$?
m_bought=$(date +%s.%N)
TXC=$(tr -dc 0-9 <"$WORK/c-m.out")
note "$installer of libstorekit0, libstorekit-dev, python3-storekit: $(python3 -c "print('%.1f' % ($m_installed - $m_start))") s (exit $apt_status); cc: $(python3 -c "print('%.3f' % ($m_built - $m_installed))") s; first purchase: $(python3 -c "print('%.3f' % ($m_bought - $m_built))") s; from the installation to the first purchase: $(python3 -c "print('%.1f' % ($m_bought - $m_start))") s"
c_ok() {
    [ "$apt_status" = 0 ] && [ "$cc_status" = 0 ] && [ "$c_status" = 0 ] && [ -n "$TXC" ] &&
        [ "$(transaction "$TXC" | json "d and (d['uid'], d['finished'])")" = "(1000, True)" ]
}
check "m. the C example, built with pkg-config from the installed packages, buys, verifies and finishes as uid 1000"     "apt exit $apt_status ($(tail -1 "$WORK/apt-m.log")); cc exit $cc_status $(head -c 300 "$WORK/cc-m.log"); run exit $c_status, printed '$(head -c 100 "$WORK/c-m.out")' $(head -c 300 "$WORK/c-m.err"); ledger: $(transaction "$TXC" | json "d and (d['uid'], d['finished'])")" \
    c_ok
AS 1001 timeout 60 python3 /usr/share/doc/storekit-examples/examples/python/buy_and_finish.py com.example.game com.example.game.coins100 \
    >"$WORK/py-m.out" 2>"$WORK/py-m.err"
py_status=$?
TXP=$(tr -dc 0-9 <"$WORK/py-m.out")
py_ok() { [ "$py_status" = 0 ] && [ -n "$TXP" ] && [ "$(transaction "$TXP" | json "d and (d['uid'], d['finished'])")" = "(1001, True)" ]; }
check "m. the Python example, with the installed module, buys, verifies and finishes as uid 1001" \
    "exit $py_status, printed '$(head -c 100 "$WORK/py-m.out")' $(head -c 300 "$WORK/py-m.err"); ledger: $(transaction "$TXP" | json "d and (d['uid'], d['finished'])")" \
    py_ok

# ---------------------------------------------------------------------------------------------
echo "== i. systemd-analyze security inside the container"
exposure=$(IN systemd-analyze security --no-pager storekitd.service 2>&1 | grep "Overall exposure level")
value=$(echo "$exposure" | grep -o '[0-9]*\.[0-9]' | head -1)
note "storekitd.service: $(IN systemctl show -p TasksCurrent,TasksMax,MemoryCurrent,MemoryHigh,MemoryMax storekitd.service | tr '\n' ' ')threads $(IN sh -c "awk '/^Threads:/{print \$2}' /proc/$(MAINPID)/status")"
check "i. systemd-analyze security storekitd.service" "${exposure:-no exposure line}" \
    python3 -c "import sys; sys.exit(0 if float('${value:-99}') <= 1.0 else 1)"

# ---------------------------------------------------------------------------------------------
echo "== j. purge removes the state without asking"
IN env DEBIAN_FRONTEND=noninteractive dpkg --purge storekitd >"$WORK/purge.log" 2>&1 </dev/null
purge_status=$?
check "j. dpkg --purge storekitd" \
    "exit status $purge_status; /var/lib/storekitd $(IN test -e /var/lib/storekitd && echo exists || echo absent); units $(IN systemctl is-active storekitd.socket storekitd-control.socket storekitd.service | tr '\n' ' '); /run/storekitd: '$(IN sh -c 'ls -A /run/storekitd 2>/dev/null' | tr '\n' ' ')'" \
    eval '[ $purge_status = 0 ] && ! IN test -e /var/lib/storekitd && ! IN systemctl -q is-active storekitd.socket storekitd.service'

echo "test-system took $(($(date +%s) - START)) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
