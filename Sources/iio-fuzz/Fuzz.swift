// The fuzzer of the attribute parsers and the scan decoder (see FuzzTarget), and its corpus replayer.
//
// Built by scripts/fuzz with `-sanitize=fuzzer,address -DFUZZING`, this is a libFuzzer binary:
// IIO_FUZZ_TARGET=<target> picks the parser (else the first input byte does), and any violated
// property traps, so libFuzzer saves the input. Built normally (CI, tests) it replays files:
//
//     iio-fuzz [--target NAME] FILE|DIR...     exit 1 if any input violates a property
internal import IIOMotion
@preconcurrency internal import Glibc

/// libFuzzer's callback: one input, checked by the target in IIO_FUZZ_TARGET (or by its first byte).
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let (target, input) = FuzzTarget.select(bytes, named: FuzzTarget.fromEnvironment)
    guard let target else { return 0 }
    let violations = target.check(input)
    if let first = violations.first {
        // A trap makes libFuzzer (and AddressSanitizer) keep this input as a crash.
        fatalError("\(target.rawValue): \(first)")
    }
    return 0
}

#if FUZZING
/// libFuzzer's driver (libclang_rt.fuzzer), started from our own `main` because SwiftPM links an
/// executable's entry point under its own name.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

@main
enum FuzzMain {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { fuzzOneInput($0, $1) })
    }
}
#else
@main
enum ReplayMain {
    static func main() {
        var args = Array(CommandLine.arguments.dropFirst())
        var named: FuzzTarget?
        if args.first == "--target", args.count >= 2 {
            guard let t = FuzzTarget(rawValue: args[1]) else {
                fputs("iio-fuzz: unknown target \(args[1]) (one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")))\n", stderr)
                exit(64)
            }
            named = t
            args.removeFirst(2)
        }
        if args.isEmpty || args.first == "--help" {
            print("usage: iio-fuzz [--target NAME] FILE|DIR...   (replays inputs; scripts/fuzz builds the fuzzer)")
            exit(args.isEmpty ? 64 : 0)
        }
        var failed = 0
        var count = 0
        for path in args {
            for file in Corpus.files(at: path) {
                guard let bytes = Corpus.read(file) else {
                    fputs("iio-fuzz: cannot read \(file)\n", stderr)
                    exit(66)
                }
                // A directory named after a target replays with that target.
                let target = named ?? FuzzTarget(rawValue: Corpus.directoryName(of: file)) ?? FuzzTarget.fromEnvironment
                let (t, input) = FuzzTarget.select(bytes, named: target)
                guard let t else { continue }
                count += 1
                for v in t.check(input) {
                    failed += 1
                    print("\(file): \(t.rawValue): \(v)")
                }
            }
        }
        print("iio-fuzz: \(count) inputs, \(failed) violations")
        exit(failed == 0 ? 0 : 1)
    }
}
#endif
