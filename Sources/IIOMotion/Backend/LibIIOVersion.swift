internal import CIIOShim

/// The version of libiio this process is linked against, e.g. `"0.24"`.
public var libiioVersion: String {
    let v = iioshim_library_version()
    return "\(v / 100).\(v % 100)"
}
