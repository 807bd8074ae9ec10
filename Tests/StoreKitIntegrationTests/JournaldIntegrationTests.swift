import Foundation
import StoreKitTestSupport
import Testing

/// A real systemd-journald in a private mount namespace receives storekitd's structured entries;
/// `journalctl STOREKIT_TRANSACTION_ID=` tells a transaction's life and `-x` shows the catalog.
@Suite("journald integration",
       .enabled(if: TestEnvironment.canMountInPrivateNamespace,
                "needs root with CAP_SYS_ADMIN: runs journald in a private mount namespace (unshare --mount)"))
struct JournaldIntegrationTests {
    @Test("structured fields, a MESSAGE_ID per event, and catalog text through journalctl -x")
    func journalFieldsAndCatalog() throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd-journald"),
                     "systemd-journald is missing: run `make test`, which installs systemd")
        let work = TemporaryDirectory("skj")
        defer { work.remove() }
        let build = Paths.buildDirectory
        let repository = Paths.repository
        try work.write("run.sh", """
            set -eu
            W=\(work.path)
            mkdir -p /run/systemd/journal /run/log/journal /var/lib/systemd/catalog
            mount -t tmpfs tmpfs /run/systemd/journal
            mount -t tmpfs tmpfs /run/log/journal
            mount -t tmpfs tmpfs /var/lib/systemd/catalog
            mkdir -p $W/catalog
            cp /usr/lib/systemd/catalog/* $W/catalog/ 2>/dev/null || true
            cp \(repository)/systemd/storekitd.catalog $W/catalog/
            mount --bind $W/catalog /usr/lib/systemd/catalog
            journalctl --update-catalog
            setsid /lib/systemd/systemd-journald </dev/null >/dev/null 2>&1 & J=$!
            trap 'kill $J 2>/dev/null || true' EXIT
            until [ -S /run/systemd/journal/socket ]; do sleep 0.05; done
            \(build)/storekitd --config \(repository)/config/storekitd.conf --runtime-dir $W/run --state-dir $W/state \\
                --log-target=journal 2>$W/daemon.stderr & D=$!
            until [ -S $W/run/control.sock ]; do sleep 0.05; done
            export STOREKITD_SOCKET=$W/run/storekitd.sock STOREKITD_CONTROL_SOCKET=$W/run/control.sock
            timeout 30 \(build)/storekit-example-app --ledger $W/ledger buy com.example.game.level_pack > $W/app.out || true
            ID=$(sed -n 's/.*"transactionIdentifier":"\\([0-9]*\\)".*/\\1/p' $W/app.out | head -1)
            kill $D; wait $D || true
            journalctl --sync
            echo "ID=$ID"
            echo "--- json"
            journalctl --no-pager -o json STOREKIT_TRANSACTION_ID=$ID
            echo "--- catalog"
            journalctl --no-pager -x STOREKIT_TRANSACTION_ID=$ID
            echo "--- stderr"
            cat $W/daemon.stderr
            """)
        let result = try ProcessRunner.run("/usr/bin/unshare", ["--mount", "--propagation", "private", "bash", work.file("run.sh")],
                                           timeout: 90)
        try #require(result.status == 0, "namespace script failed: \(result.stderr)\n\(result.stdout)")
        let output = result.stdout
        let id = try #require(output.split(separator: "\n").first { $0.hasPrefix("ID=") }.map { String($0.dropFirst(3)) })
        try #require(!id.isEmpty, "the example app did not report a transaction: \(output)")

        let jsonPart = try #require(output.components(separatedBy: "--- json\n").last?.components(separatedBy: "--- catalog").first)
        let entries = jsonPart.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        // The whole life: purchasing, purchased, its content asked for, finished — each a structured
        // entry with a MESSAGE_ID.
        let states = entries.compactMap { $0["STOREKIT_STATE"] as? String }
        #expect(states == ["purchasing", "purchased", "finished"], "states: \(states)")
        for entry in entries {
            #expect(entry["STOREKIT_APP"] as? String == "com.example.game")
            #expect(entry["STOREKIT_UID"] as? String == String(getuid()))
            #expect(entry["STOREKIT_PRODUCT"] as? String == "com.example.game.level_pack")
            #expect((entry["MESSAGE_ID"] as? String)?.count == 32)
        }
        let ids = Set(entries.compactMap { $0["MESSAGE_ID"] as? String })
        #expect(ids.count == 3, "state change, the request for the level pack's hosted content and finish have their own MESSAGE_IDs")

        // journalctl -x fills the catalog text with the entry's fields.
        #expect(output.contains("Subject: Transaction \(id) is now purchased"))
        #expect(output.contains("Subject: Transaction \(id) was finished"))
        #expect(output.contains("journalctl STOREKIT_TRANSACTION_ID=\(id)"))
        // With --log-target=journal nothing goes to stderr.
        let stderrPart = output.components(separatedBy: "--- stderr\n").last ?? ""
        #expect(stderrPart.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "stderr: \(stderrPart)")
    }
}
