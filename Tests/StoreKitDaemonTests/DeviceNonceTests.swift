import Foundation
import StoreKitSigning
import Testing
@testable import StoreKitDaemon

/// The device verification's nonce: a version-4 UUID, as Apple's, made without opening a file.
@Suite struct DeviceNonceTests {
    @Test func isAVersionFourUUIDWithTheRFCVariant() {
        for _ in 0..<1_000 {
            let text = ProofOfPurchase.randomUUID().uuidString.lowercased()
            let characters = Array(text)
            #expect(characters.count == 36)
            #expect(characters[14] == "4", "version nibble of \(text)")
            #expect("89ab".contains(characters[19]), "variant nibble of \(text)")
            #expect(UUID(uuidString: text) != nil)
        }
    }

    @Test func differsEachTime() {
        let nonces = Set((0..<10_000).map { _ in ProofOfPurchase.randomUUID() })
        #expect(nonces.count == 10_000)
    }

    @Test func verificationMembersCarryTheNonceTheyHashed() throws {
        let members = ProofOfPurchase.verificationMembers(device: Array(repeating: 7, count: 16))
        #expect(members.map(\.0) == ["deviceVerificationNonce", "deviceVerification"])
        guard case .string(let nonce) = members[0].1, case .string(let verification) = members[1].1 else {
            Issue.record("not strings: \(members)")
            return
        }
        #expect(UUID(uuidString: nonce) != nil && nonce == nonce.lowercased())
        #expect(Data(base64Encoded: verification)?.count == 48)   // SHA-384
        #expect(Data(base64Encoded: verification).map(Array.init)
                == Digest.deviceVerification(nonce: nonce, deviceIdentifier: Array(repeating: 7, count: 16)),
                "the hash StoreKit's clients check: SHA-384 of the nonce and the device identifier, as lowercase UUIDs")
    }

    @Test func uuidStringsAreFoundationsInLowerCase() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1_000 {
            let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                   bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
            #expect(Digest.uuidString(bytes) == uuid.uuidString.lowercased())
        }
        #expect(Digest.uuidString([0x0a, 0xff]) == "0aff", "fewer than 16 bytes: their digits alone")
        #expect(Digest.uuidString(Array(repeating: 1, count: 20)) == "01010101-0101-0101-0101-010101010101", "the first 16")
    }
}
