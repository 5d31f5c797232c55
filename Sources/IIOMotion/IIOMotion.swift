// IIOMotion, the library users import: the streaming core (IIOMotionCore: MotionManager, the
// values, streaming, device motion, calibration), re-exported whole, and what runs it on libiio
// (IIOMotionLibIIO): MotionManager's public initializer, the kernel's calibbias files and the
// version of libiio.
@_exported public import IIOMotionCore
internal import IIOMotionLibIIO

/// The version of libiio this process is linked against, e.g. `"0.24"`.
public var libiioVersion: String { LibIIOBackend.libraryVersion }
