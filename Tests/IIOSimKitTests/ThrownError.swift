import Testing

/// The error `body` throws, which must be an `E`; the test stops there (a failed `#require`)
/// when it throws nothing or another type. What `try thrownError(E.self) { … }` returns
/// from Swift 6.1 on; Swift 6.0's Testing returns nothing from it, so the tests use this on both.
/// - Parameters:
///   - type: the error type expected.
///   - body: the call that must throw.
/// - Returns: the error thrown.
/// - Throws: the failed expectation (recorded at `sourceLocation`).
func thrownError<E: Error, R>(_ type: E.Type, sourceLocation: SourceLocation = #_sourceLocation,
                              _ body: () throws -> R) throws -> E {
    var thrown: (any Error)?
    do { _ = try body() } catch { thrown = error }
    return try #require(thrown as? E, "expected \(E.self) to be thrown, got \(thrown.map { "\($0)" } ?? "no error")",
                        sourceLocation: sourceLocation)
}
