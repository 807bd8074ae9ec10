import Foundation

// storekitd-bench: storekitd against a durable Redis stream (appendfsync always) and the
// machine's limits, in one run. Prints a table and writes bench-results.json.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--worker" {
    exit(Worker.main(arguments))
}
if arguments.contains("-h") || arguments.contains("--help") {
    say("""
        Usage: storekitd-bench [--quick] [--only PHASES] [--output FILE] [--noisy-rate N]

        Starts storekitd (built next to this binary) and redis-server on temporary directories and
        measures purchase cycles, latency, replay, fan-out, start-up, RSS and the machine's limits.
        --quick shortens every phase (for a smoke test); --output sets the JSON file
        (default bench-results.json in the current directory). --only runs some phases, a comma-separated
        list of cycles, latency, postgres, signing, noisy, floods, replay, fanout, startup and downloads
        (the limits and idle RSS always run). postgres starts a PostgreSQL 15 of its own (as root, postgresql-15
        installed; skipped with the reason otherwise) and measures storekitd on it beside SQLite and the
        peer: purchase cycles, latency, and a fleet's cross-host delivery (two daemons on one database),
        and the server's own commit rate with pgbench (one INSERT per transaction) at 1, 8 and 100
        clients beside the ledger's cycles. noisy measures a victim's purchases while another uid
        floods purchase cycles, on a daemon with the shipped limits (--noisy-rate N sets its
        MaxRequestsPerUIDPerSecond= instead) and with the rate off: three rounds of the victim alone
        and flooded each, the medians reported. floods does the same (rate off) for two other flood
        kinds by another uid (nobody, through setpriv: needs root): history pages of 5,000 finished
        purchases, and receipts of 5,000 unfinished consumables with a purchase every 16 receipts,
        16 requests in flight; the victim's purchase p99 and its ping p99 each alone and flooded.
        --quick runs one round of fewer purchases in noisy and floods. downloads times a buyer's app
        (OpenStoreKit's SKDownload, in this process) getting 512 MiB of hosted content (256 with
        --quick), against cp -r of the same folder with and without a sync of the copy.
        """)
    exit(0)
}
let quick = arguments.contains("--quick")
let outputPath = arguments.firstIndex(of: "--output").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    ?? "bench-results.json"

raiseFileLimit()
do {
    let only = arguments.firstIndex(of: "--only").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        .map { Set($0.split(separator: ",").map(String.init)) } ?? []
    let noisyRate = arguments.firstIndex(of: "--noisy-rate").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil } ?? ""
    let bench = try Bench(quick: quick, only: only, noisyRate: noisyRate)
    let figures: [Figure]
    do {
        figures = try bench.runAll()
    } catch {
        bench.cleanUp()
        throw error
    }
    bench.cleanUp()
    Report.printTable(figures)
    if !bench.ledgerFigures.isEmpty || !bench.ledgerNotes.isEmpty {
        LedgerFigure.printTable(bench.ledgerFigures, notes: bench.ledgerNotes, commitRates: bench.commitRates)
    }
    try Report.writeJSON(figures, extra: LedgerFigure.json(bench.ledgerFigures, notes: bench.ledgerNotes, commitRates: bench.commitRates),
                         to: outputPath)
    say("\nWrote \(outputPath)")
} catch {
    FileHandle.standardError.write(Data("storekitd-bench: \(error)\n".utf8))
    exit(1)
}
