internal import CIIOShim

extension LibIIOBackend {
    /// The version of libiio this process is linked against, e.g. `"0.24"` (IIOMotion's public
    /// `libiioVersion`).
    package static var libraryVersion: String {
        let v = iioshim_library_version()
        return "\(v / 100).\(v % 100)"
    }
}
