import Foundation
import Testing

/// Whether this machine can run the integration tests at all. Elsewhere a suite that cannot run is
/// skipped with its reason; under `CI=true` that is a failure, here, with the reason.
@Suite("Integration environment", .timeLimit(.minutes(10)))
struct IntegrationEnvironmentTests {
    @Test("iio-sim, motion-monitor and motion-scenarios are built, and iio-sim can create its namespaces")
    func ready() {
        var reasons: [String] = []
        if !SimHarness.monitorNotReadyReason.isEmpty { reasons.append(SimHarness.monitorNotReadyReason) }
        if !FileManager.default.isExecutableFile(atPath: SimHarness.product("motion-scenarios")) {
            reasons.append("motion-scenarios is not built (swift build)")
        }
        guard !reasons.isEmpty else { return }
        if SimHarness.underCI {
            Issue.record("CI=true, but the integration tests cannot run: \(reasons.joined(separator: "; "))")
        } else {
            print("note: integration suites are skipped here: \(reasons.joined(separator: "; "))")
        }
    }
}
