@testable import StoreKitPostgres
import Testing

/// A connection string's password never leaves the daemon: every form of it is masked in any
/// message that quotes the string, libpq's own included.
@Suite struct ConnectionSecretsTests {
    @Test("the password of every form of connection string is masked wherever a message quotes it",
          arguments: [
              ("postgresql://storekitd:S3cretPW@[::1/storekit", "S3cretPW"),                // malformed: libpq quotes it whole
              ("postgresql://storekitd:S3cretPW@db.example/storekit", "S3cretPW"),
              ("postgres://u:p%40ss%2Fword@host/db", "p@ss/word"),                          // percent-encoded
              ("postgresql://u@host/db?password=S3cretPW&sslmode=disable", "S3cretPW"),
              ("host=/run/postgresql dbname=storekit password=S3cretPW", "S3cretPW"),
              ("host=/run/postgresql password = 'S3cret PW' dbname=storekit", "S3cret PW"),
              ("host=/run/postgresql dbname=x password='S3cret PW", "S3cret PW"),           // unterminated quote
          ])
    func masked(conninfo: String, password: String) {
        let message = "invalid URI: \"\(conninfo)\" (password \(password), decoded or not)"
        let redacted = ConnectionSecrets.redacting(message, of: conninfo)
        #expect(!redacted.contains(password), "\(redacted)")
        #expect(redacted.contains(ConnectionSecrets.mask))
        #expect(ConnectionSecrets.holdsPassword(conninfo))
    }

    @Test("spellings only libpq knows hold a password too: a percent-encoded query key, tabs around '='")
    func libpqSpellings() {
        for conninfo in ["postgresql:///db?host=/x&pass%77ord=SECRET", "host=/x password\t=\tSECRET"] {
            #expect(ConnectionSecrets.holdsPassword(conninfo), "\(conninfo.debugDescription)")
            #expect(!ConnectionSecrets.redacting("a message naming SECRET", of: conninfo).contains("SECRET"))
        }
    }

    @Test("libpq's parse errors of malformed strings never carry a piece of the password", arguments: [
        ("postgresql:///db?host=/x&pass%77ord=LEAKED%zz", "LEAKED"),
        ("postgresql://[::1/db?pass%77ord=WHOLEURI", "WHOLEURI"),
        ("host=/x password=my secretpart", "secretpart"),
        ("postgresql://[::1/db?password='ab'LEAKTAIL", "LEAKTAIL"),
        ("host=/x password='unterminated", "unterminated"),
    ])
    func malformedNeverLeaks(conninfo: String, secret: String) throws {
        let problem = try #require(PostgresLedger.problem(with: conninfo), "libpq parsed \(conninfo)")
        #expect(!problem.contains(secret), "\(problem)")
        #expect(!ConnectionSecrets.redacting("libpq: \"\(conninfo)\"", of: conninfo).contains(secret))
    }

    @Test("a string without a password is left as it is and holds none")
    func noPassword() {
        for conninfo in ["host=/run/postgresql dbname=storekit", "postgresql:///storekit?host=/run/postgresql",
                         "postgresql://storekitd@db/storekit", "passfile=/etc/storekitd/pgpass dbname=x"] {
            #expect(!ConnectionSecrets.holdsPassword(conninfo), "\(conninfo)")
            #expect(ConnectionSecrets.redacting("about \(conninfo)", of: conninfo) == "about \(conninfo)")
        }
    }

    @Test("libpq's parse error of a malformed URI names the string; what the config loader gets has no password")
    func libpqParseError() throws {
        let conninfo = "postgresql://storekitd:S3cretPW@[::1/storekit"
        let problem = try #require(PostgresLedger.problem(with: conninfo))
        #expect(problem.contains("********"), "libpq quotes the string: \(problem)")
        #expect(!problem.contains("S3cretPW"))
    }
}
