import Testing
@testable import IIOSimKit

@Suite("Sampling-frequency snapping (DeviceSim.snap)", .timeLimit(.minutes(3)))
struct SnapTests {
    @Test("A discrete list: the nearest value, ties going up", arguments: [
        // mpu6050
        ("10 20 50 100 200 500", 49.0, 50.0), ("10 20 50 100 200 500", 74, 50), ("10 20 50 100 200 500", 76, 100),
        ("10 20 50 100 200 500", 75, 100), ("10 20 50 100 200 500", 35, 50), ("10 20 50 100 200 500", 15, 20),
        ("10 20 50 100 200 500", 0, 10), ("10 20 50 100 200 500", 1000, 500), ("10 20 50 100 200 500", 100, 100),
        // lsm6dsx prints three decimals; 19.25 is exactly between 12.5 and 26.
        ("12.500 26.000 52.000 104.000 208.000 416.000", 13, 12.5),
        ("12.500 26.000 52.000 104.000 208.000 416.000", 19.25, 26),
        ("12.500 26.000 52.000 104.000 208.000 416.000", 100, 104),
        // bmi160 accel
        ("0.78125 1.5625 3.125 6.25 12.5 25 50 100 200 400 800 1600", 1, 0.78125),
        ("0.78125 1.5625 3.125 6.25 12.5 25 50 100 200 400 800 1600", 150, 200),
        ("0.78125 1.5625 3.125 6.25 12.5 25 50 100 200 400 800 1600", 149, 100),
        ("0.78125 1.5625 3.125 6.25 12.5 25 50 100 200 400 800 1600", 5000, 1600),
        // Order of the list does not matter; extra spaces are ignored.
        ("500 200 100 50 20 10", 35, 50), ("  10  20 ", 14, 10), ("7", 1000, 7),
    ])
    func list(available: String, requested: Double, expected: Double) {
        #expect(DeviceSim.snap(requested, available: available) == expected)
    }

    @Test("A range [min step max]: clamped, then rounded to the step", arguments: [
        ("[0.0 0.002 1.99]", 1.0, 1.0), ("[0.0 0.002 1.99]", 0.0031, 0.004), ("[0.0 0.002 1.99]", 0.0029, 0.002),
        ("[0.0 0.002 1.99]", 5, 1.99), ("[0.0 0.002 1.99]", -1, 0), ("[0.0 0.002 1.99]", 1.999, 1.99),
        ("[25 25 3200]", 60, 50), ("[25 25 3200]", 63, 75), ("[25 25 3200]", 1, 25), ("[25 25 3200]", 9999, 3200),
        // max off the grid: 93 → 1 + 9·10 = 91; rounding up past max is capped at max.
        ("[1 10 95]", 93, 91), ("[0 10 96]", 96, 96), ("[0 10 96]", 95.5, 96),
        // Step 0: clamp only.
        ("[1 0 5]", 7, 5), ("[1 0 5]", 3.3, 3.3), ("[1 0 5]", 0.5, 1),
        ("  [10 10 100]  ", 44, 40),
    ])
    func range(available: String, requested: Double, expected: Double) {
        #expect(abs(DeviceSim.snap(requested, available: available) - expected) < 1e-9)
    }

    @Test("cros-ec's `0 min max`: 0 stays 0 (stopped), anything else is clamped to [min, max]", arguments: [
        ("0.000000 12.500000 100.000000", 0.0, 0.0), ("0.000000 12.500000 100.000000", 5, 12.5),
        ("0.000000 12.500000 100.000000", 12.5, 12.5), ("0.000000 12.500000 100.000000", 50, 50),
        ("0.000000 12.500000 100.000000", 33.3, 33.3), ("0.000000 12.500000 100.000000", 200, 100),
        ("0.000000 12.500000 100.000000", 0.01, 12.5),
        ("0.000000 25.000000 100.000000", 10, 25), ("0 25 100", 99, 99),
    ])
    func crosEC(available: String, requested: Double, expected: Double) {
        #expect(DeviceSim.snap(requested, available: available) == expected)
    }

    @Test("Nothing usable in _available: the request stands", arguments: ["", "   ", "fast slow", "[1 2]", "[a b c]"])
    func unusable(available: String) {
        #expect(DeviceSim.snap(42.5, available: available) == 42.5)
    }
}
