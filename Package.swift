// swift-tools-version:6.0
// IIOMotion: Core-Motion-style accelerometer and gyroscope readings from Linux IIO devices,
// through libiio 0.24 or 0.26 (Debian's libiio-dev).
// Copyright the IIOMotion authors. Licensed under the Apache License, Version 2.0 (LICENSE).
import PackageDescription

/// One settings list for every Swift target: Swift 6 language mode is the package default
/// (tools 6.0); these add the checks we hold ourselves to.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The C targets' settings. Their warnings (-Wall -Wextra) are switched on by pragmas at the top
/// of each C file: `unsafeFlags` here would keep other packages from depending on IIOMotion by
/// version ("contains unsafe build flags").
let cSettings: [CSetting] = [
    .define("_GNU_SOURCE"),
]

/// Release builds of our executables carry the Swift runtime inside (`-static-stdlib`): they start
/// in about half the time (no dynamic linking of a dozen Swift libraries) and run on a board that
/// has libiio but no Swift toolchain. Debug and sanitizer builds stay dynamic.
let staticRuntime: [LinkerSetting] = [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release))]

let package = Package(
    name: "IIOMotion",
    products: [
        .library(name: "IIOMotion", targets: ["IIOMotion"]),
        .executable(name: "motion-monitor", targets: ["motion-monitor"]),
        .executable(name: "iio-sim", targets: ["iio-sim"]),
        .executable(name: "motion-collect", targets: ["motion-collect"]),
    ],
    targets: [
        // libiio itself, found through pkg-config; Debian/Ubuntu install it with `apt-get install libiio-dev`.
        .systemLibrary(
            name: "CLibIIO",
            pkgConfig: "libiio",
            providers: [.apt(["libiio-dev"])]
        ),
        // libudev, found through pkg-config (`apt-get install libudev-dev`): discovery reads udev's
        // hardware-database properties of each local IIO device (ACCEL_MOUNT_MATRIX, ACCEL_LOCATION)
        // through IIOMotionLibIIO's UdevDatabase+System.swift, the only code that calls it.
        .systemLibrary(
            name: "CLibUdev",
            pkgConfig: "libudev",
            providers: [.apt(["libudev-dev"])]
        ),
        // The only code that calls libiio (from IIOMotionLibIIO).
        .target(name: "CIIOShim", dependencies: ["CLibIIO", "CSystemSupport"], cSettings: cSettings),
        // What every target shares: a lock ThreadSanitizer understands (see Locked.swift for why not
        // Synchronization.Mutex), the monotonic clock, the one way to start a thread, errno text,
        // and the calling thread's name, role and SIGPIPE block (CSystemSupport: a thread-local flag
        // CIIOShim's SIGPIPE guard reads on every libiio call).
        .target(name: "CSystemSupport", cSettings: cSettings),
        .target(name: "SystemSupport", dependencies: ["CSystemSupport"], swiftSettings: swiftSettings),
        // The one description of a scan element's format (`le:s12/16>>4`: parse, print, read),
        // shared by IIOMotionCore's decoder, the fuzzer and the simulator. Pure Swift, no libiio.
        .target(name: "IIOScanFormat", swiftSettings: swiftSettings),
        // The library in three layers. IIOMotionCore is everything but libiio: MotionManager, the
        // values, discovery and the capture on the device seam (DeviceIO, DeviceBackend), decoding,
        // the hub and delivery, device motion, calibration. It cannot import libiio or libudev.
        .target(name: "IIOMotionCore", dependencies: ["SystemSupport", "IIOScanFormat"], swiftSettings: swiftSettings),
        // The seam on libiio and this machine's udev (LibIIOBackend); what it needs of the core is
        // `package`, not public.
        .target(name: "IIOMotionLibIIO", dependencies: ["IIOMotionCore", "CIIOShim", "CLibUdev", "SystemSupport", "IIOScanFormat"],
                swiftSettings: swiftSettings),
        // The product users import: IIOMotionCore re-exported, plus MotionManager's public
        // initializer, KernelOffsets' read and write, and libiioVersion, on IIOMotionLibIIO.
        .target(name: "IIOMotion", dependencies: ["IIOMotionCore", "IIOMotionLibIIO"], swiftSettings: swiftSettings),
        .executableTarget(name: "motion-monitor", dependencies: ["IIOMotion", "MotionMQTT", "SystemSupport"], swiftSettings: swiftSettings,
                          linkerSettings: staticRuntime),
        // Library scenarios the integration tests run inside iio-sim (a test process cannot enter
        // the simulator's namespaces itself); not a product.
        .executableTarget(name: "motion-scenarios", dependencies: ["IIOMotion", "SystemSupport"], swiftSettings: swiftSettings,
                          linkerSettings: staticRuntime),
        // Device motion against the simulator's ground truth (scripts/fusion-accuracy, DeviceMotionTests).
        .executableTarget(name: "motion-truth", dependencies: ["IIOMotion", "IIOSimKit", "SystemSupport"], swiftSettings: swiftSettings),

        // MQTT through Debian's libmosquitto (`apt-get install libiio-dev libmosquitto-dev`): the
        // publisher motion-monitor --mqtt uses and the collector. IIOMotion does not depend on it.
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        .target(name: "MotionMQTT", dependencies: ["CMosquitto", "SystemSupport"], swiftSettings: swiftSettings),
        .executableTarget(name: "motion-collect", dependencies: ["MotionMQTT", "SystemSupport"], swiftSettings: swiftSettings,
                          linkerSettings: staticRuntime),

        // The simulator: a library (fixtures, scan encoding, motion, the sysfs engine) and a thin executable.
        .target(name: "CSimSupport", cSettings: cSettings),
        .target(name: "IIOSimKit", dependencies: ["CSimSupport", "SystemSupport", "IIOScanFormat"], swiftSettings: swiftSettings),
        .executableTarget(name: "iio-sim", dependencies: ["IIOSimKit", "CSimSupport", "SystemSupport"], swiftSettings: swiftSettings),

        // The fuzzer of the attribute parsers and the scan decoder (scripts/fuzz builds it with
        // libFuzzer and AddressSanitizer); built plainly it replays a corpus. Not a product.
        .executableTarget(name: "iio-fuzz", dependencies: ["IIOMotion", "IIOSimKit", "IIOScanFormat"], swiftSettings: swiftSettings),

        .testTarget(name: "IIOMotionTests", dependencies: ["IIOMotion", "IIOMotionCore", "IIOMotionLibIIO", "iio-fuzz", "IIOSimKit", "IIOScanFormat"], swiftSettings: swiftSettings),
        .testTarget(name: "MotionMQTTTests", dependencies: ["MotionMQTT"], swiftSettings: swiftSettings),
        .testTarget(name: "IIOSimKitTests", dependencies: ["IIOSimKit", "IIOScanFormat"], swiftSettings: swiftSettings),
        .testTarget(name: "MotionMonitorTests", dependencies: ["motion-monitor", "IIOMotion", "IIOMotionCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["IIOSimKit", "IIOScanFormat"],
            swiftSettings: swiftSettings
        ),
    ]
)
