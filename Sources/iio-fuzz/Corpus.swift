internal import Foundation

/// Files of a corpus on disk.
enum Corpus {
    /// `path` itself if it is a file, else every regular file under it, sorted.
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [path] }
        guard isDirectory.boolValue else { return [path] }
        let root = URL(fileURLWithPath: path)
        let all = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])?
            .compactMap { $0 as? URL }
            .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
            .map(\.path) ?? []
        return all.sorted()
    }

    /// The bytes of `file`, or nil if it cannot be read.
    static func read(_ file: String) -> [UInt8]? {
        FileManager.default.contents(atPath: file).map { [UInt8]($0) }
    }

    /// The name of the directory holding `file` (a target's corpus is a directory named after it).
    static func directoryName(of file: String) -> String {
        URL(fileURLWithPath: file).deletingLastPathComponent().lastPathComponent
    }
}
