internal import Glibc

/// A string copied out as a C string for a library that keeps the pointer (libmicrohttpd its
/// certificate and key, for as long as its daemon runs): the copy lives as long as this value,
/// and its bytes are wiped (`explicit_bzero`, which the compiler never leaves out) before they
/// are freed — a private key does not linger in freed memory.
///
/// `@unchecked Sendable`: the bytes are written once, here, and only read afterwards.
public final class CStringCopy: @unchecked Sendable {
    /// The NUL-terminated copy.
    public let pointer: UnsafeMutablePointer<CChar>
    private let count: Int

    public init(_ text: String) {
        let bytes = text.utf8CString
        count = bytes.count
        pointer = UnsafeMutablePointer<CChar>.allocate(capacity: count)
        bytes.withUnsafeBufferPointer { pointer.initialize(from: $0.baseAddress!, count: count) }
    }

    deinit {
        explicit_bzero(pointer, count)
        pointer.deallocate()
    }
}
