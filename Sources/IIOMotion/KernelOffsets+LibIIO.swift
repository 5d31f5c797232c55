public import IIOMotionCore
internal import IIOMotionLibIIO

/// The calibbias files of a sensor on a libiio context (the work is done on the context's
/// ``DeviceIO`` in IIOMotionCore).
extension KernelOffsets {
    /// Reads a sensor's three calibbias files.
    /// - Parameters:
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    /// - Returns: x, y, z counts.
    /// - Throws: ``MotionError`` naming the device and file when one is missing or not a number.
    public static func read(_ sensor: SensorInfo, uri: String) throws(MotionError) -> [Int] {
        try read(sensor, in: LibIIOBackend().open(uri: uri))
    }

    /// Writes a sensor's three calibbias files and reads them back. When a write fails, or a file
    /// reads back other than written, the files already written are put back to what they held
    /// before, and the error says so (or says which could not be put back): the device is never
    /// left with some axes written and others not.
    /// - Parameters:
    ///   - values: x, y, z counts.
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    /// - Throws: ``MotionError`` naming the device and file (``MotionError/Code/permissionDenied``
    ///   when not root), or when a file reads back other than written.
    public static func write(_ values: [Int], to sensor: SensorInfo, uri: String) throws(MotionError) {
        try write(values, to: sensor, in: LibIIOBackend().open(uri: uri))
    }
}

