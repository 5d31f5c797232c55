#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import IIOSimKit

/// Helpers shared by the IIOSimKit tests. Nothing here calls the code under test to produce an
/// expected value.
enum TestSupport {
    /// The package's `fixtures/` folder, found from this file (Tests/IIOSimKitTests/…).
    static let fixturesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../fixtures").standardized.path

    /// Names (without `.json`) of every fixture shipped in `fixtures/`.
    static var shippedFixtureNames: [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: fixturesDirectory)) ?? []
        return files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// The path of a shipped fixture.
    static func fixturePath(_ name: String) -> String { fixturesDirectory + "/" + name + ".json" }

    /// A fresh, empty temporary directory; the caller removes it.
    static func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("iio-simkit-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A file's exact contents, or nil when it cannot be read.
    static func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `lstat` of a path: its permission bits and whether it is a FIFO; nil when it does not exist.
    static func mode(_ path: String) -> (permissions: mode_t, isFIFO: Bool, isRegular: Bool)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (st.st_mode & 0o7777, st.st_mode & S_IFMT == S_IFIFO, st.st_mode & S_IFMT == S_IFREG)
    }
}

/// A tiny deterministic generator (xorshift64*) so random cases repeat from run to run.
struct TestRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x2545_F491_4F6C_DD1D : seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
}

/// Vector helpers for the physics tests.
extension SIMD3 where Scalar == Double {
    var length: Double { (self * self).sum().squareRoot() }

    func cross(_ b: Self) -> Self {
        Self(y * b.z - z * b.y, z * b.x - x * b.z, x * b.y - y * b.x)
    }

    /// Every component within `tolerance` of `other`'s.
    func isClose(to other: Self, tolerance: Double = 1e-9) -> Bool {
        abs(x - other.x) <= tolerance && abs(y - other.y) <= tolerance && abs(z - other.z) <= tolerance
    }
}
