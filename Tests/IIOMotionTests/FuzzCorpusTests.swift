import Foundation
import Testing
import IIOMotion
import IIOScanFormat
@testable import iio_fuzz

/// The fuzzer's corpus (Tests/Fuzz/corpus/<target>: seeds from the fixtures and every input
/// `scripts/fuzz` ever found failing) replayed through the same checks, without sanitizers, plus
/// a short seeded mutation run of each target: every input gives a valid value or a clear
/// rejection, never a crash, a trap, NaN/inf or a silent 0.
@Suite(.timeLimit(.minutes(3))) struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    static func inputs(_ target: FuzzTarget) -> [(name: String, bytes: [UInt8])] {
        Corpus.files(at: corpus.appendingPathComponent(target.rawValue).path).compactMap { f in
            Corpus.read(f).map { (URL(fileURLWithPath: f).lastPathComponent, $0) }
        }
    }

    @Test("every corpus input keeps its target's properties", arguments: FuzzTarget.allCases)
    func corpus(_ target: FuzzTarget) {
        let inputs = Self.inputs(target)
        #expect(inputs.count >= 3, "Tests/Fuzz/corpus/\(target.rawValue) has \(inputs.count) inputs")
        for input in inputs {
            let violations = target.check(input.bytes)
            #expect(violations.isEmpty, "\(target.rawValue)/\(input.name): \(violations.joined(separator: "; "))")
        }
    }

    /// A short, deterministic stand-in for `scripts/fuzz`: corpus inputs mutated the way libFuzzer
    /// does (bytes flipped, inserted, removed, spliced, hostile tokens such as `nan` or `1e999`).
    @Test("a seeded mutation run keeps every target's properties", arguments: FuzzTarget.allCases)
    func mutations(_ target: FuzzTarget) {
        let seeds = Self.inputs(target).map(\.bytes)
        var rng = SplitMix64(seed: 0x8_1022_f022 ^ UInt64(target.rawValue.utf8.count))
        let tokens = ["nan", "inf", "-inf", "1e999", "1e-999", "0x10", "-", "+", ".", "e", ";", ",", "[", "]", " ", "\n", "\0",
                      "\u{FF}", "9223372036854775808", "-9223372036854775809", "X", ">>", "64", "0", "le:", "be:s"].map { Array($0.utf8) }
        var failures = 0
        for _ in 0..<1500 {
            var b = seeds.isEmpty ? [] : seeds[Int(rng.next() % UInt64(seeds.count))]
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let at = b.isEmpty ? 0 : Int(rng.next() % UInt64(b.count + 1))
                switch rng.next() % 6 {
                case 0 where !b.isEmpty: b[min(at, b.count - 1)] ^= UInt8(truncatingIfNeeded: 1 << (rng.next() % 8))
                case 1: b.insert(UInt8(truncatingIfNeeded: rng.next()), at: at)
                case 2 where !b.isEmpty: b.remove(at: min(at, b.count - 1))
                case 3: b.insert(contentsOf: tokens[Int(rng.next() % UInt64(tokens.count))], at: at)
                case 4 where !seeds.isEmpty:
                    let other = seeds[Int(rng.next() % UInt64(seeds.count))]
                    b = Array(b[..<at]) + other[Int(rng.next() % UInt64(other.count + 1))...]
                default: if !b.isEmpty { b[min(at, b.count - 1)] = UInt8(truncatingIfNeeded: rng.next()) }
                }
            }
            let violations = target.check(b)
            if !violations.isEmpty {
                failures += 1
                if failures <= 5 { Issue.record("\(target.rawValue) \(b): \(violations.joined(separator: "; "))") }
            }
        }
        #expect(failures == 0)
    }

    @Test func theChecksCatchAWrongDecoding() {
        // The harness's own oracle, on hand-made scans: le:s12/16>>4 of 0x8000 is −2048;
        // be:u16/16 reads bytes in order; le:s64/64 reads the whole word.
        let bytes: [UInt8] = [0x00, 0x80, 0x12, 0x34, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]
        bytes.withUnsafeBytes { scan in
            let s12 = ScanFormat(isBigEndian: false, isSigned: true, realBits: 12, storageBits: 16, repeat: 1, shift: 4)
            let u16 = ScanFormat(isBigEndian: true, isSigned: false, realBits: 16, storageBits: 16, repeat: 1, shift: 0)
            let s64 = ScanFormat(isBigEndian: false, isSigned: true, realBits: 64, storageBits: 64, repeat: 1, shift: 0)
            #expect(DecoderChecks.oracle(scan, at: 0, s12) == -2048)
            #expect(DecoderChecks.oracle(scan, at: 2, u16) == 0x1234)
            #expect(DecoderChecks.oracle(scan, at: 4, s64) == Int64.max)
        }
        // The second reading of the number grammar.
        #expect(!TextChecks.decimalSyntax("1e").valid)
        #expect(!TextChecks.decimalSyntax(".").valid)
        #expect(TextChecks.decimalSyntax("-.5E+3").valid && TextChecks.decimalSyntax("-.5E+3").nonZeroMantissa)
        #expect(TextChecks.decimalSyntax("0.000e-999").valid && !TextChecks.decimalSyntax("0.000e-999").nonZeroMantissa)
    }

    @Test func whatTheFuzzerFoundStaysFixed() throws {
        // sampling_frequency_available listing 2.2e21 Hz: the capture trapped formatting it as Int.
        let huge = try #require(SamplingFrequencies(parsing: "0.1781 2222222222222222222221.5"))
        #expect(FuzzingEntryPoints.frequencyToWrite(available: huge, current: nil, interval: 0.001, requested: nil)?.text == "0.1781")
        #expect(FuzzingEntryPoints.frequencyToWrite(available: nil, current: nil, interval: 0.1, requested: 1e300) == nil)
        // A tiny one was written as "0".
        #expect(FuzzingEntryPoints.frequencyToWrite(available: .discrete([1e-7]), current: nil, interval: 0.1, requested: nil) == nil)
        #expect(FuzzingEntryPoints.frequencyToWrite(available: .discrete([12.5, 26]), current: nil, interval: 0.1, requested: nil)?.text == "12.5")
        #expect(FuzzingEntryPoints.frequencyToWrite(available: .range(minimum: 0.78125, step: nil, maximum: 1600), current: nil,
                                                     interval: 1, requested: 0.5)?.text == "0.78125")
        // A non-zero number below a Double's range read as 0 (a scale of 0: silent zeros).
        #expect(FuzzingEntryPoints.decimal("01e-3598") == nil)
        #expect(FuzzingEntryPoints.decimal("0.0e-3598") == 0)
        #expect(FuzzingEntryPoints.decimal("1e-310") == Double("1e-310"))  // subnormal, not 0
        // A huge scale or mount matrix value made readings inf, then NaN through the matrix.
        #expect(!FuzzingEntryPoints.acceptsFactor(1e305))
        #expect(FuzzingEntryPoints.acceptsFactor(0.000598))
        #expect(throws: MotionError.self) { try MountMatrix(parsing: "1e200, 0, 0; 0, 1, 0; 0, 0, 1") }
    }

    @Test func formatsTheDecoderCannotReadAreRefused() {
        func f(_ storage: Int, _ real: Int, _ shift: Int, repeat r: Int = 1) -> ScanFormat {
            .init(isBigEndian: false, isSigned: true, realBits: real, storageBits: storage, repeat: r, shift: shift)
        }
        for ok in [f(8, 8, 0), f(16, 12, 4), f(16, 16, 0, repeat: 3), f(32, 32, 0), f(64, 64, 0), f(16, 13, 3)] {
            #expect(FuzzingEntryPoints.isDecodable(ok), "\(ok)")
        }
        // 63 storage bits: the fuzzer's heap overflow (an 8-byte load past a 7-byte element).
        // 0: what libiio leaves for a type it cannot parse. A shift of the whole word reads 0.
        for bad in [f(63, 12, 0), f(24, 24, 0), f(0, 0, 0), f(4, 4, 0), f(128, 16, 0), f(16, 0, 0), f(16, 17, 0),
                    f(16, 12, 5), f(16, 1, 16), f(16, 16, 0, repeat: 0)] {
            #expect(!FuzzingEntryPoints.isDecodable(bad), "\(bad)")
        }
    }
}

