internal import Glibc

/// A shared, readable and writable mapping of `length` bytes of a file descriptor (a camera's dmabuf),
/// unmapped in `deinit` (writable: the agent draws its overlay into a frame's own bytes). The mapping holds its own reference to the file: closing the
/// descriptor later leaves it valid.
public final class MemoryMapping: Sendable {
    /// The first byte, as an address (a plain integer, so the class is Sendable).
    public let address: UInt
    public let length: Int

    public init(descriptor: Int32, length: Int, offset: Int = 0) throws(SystemError) {
        guard length > 0 else { throw SystemError(EINVAL) }
        let pointer = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, off_t(offset))
        guard let pointer, pointer != MAP_FAILED else { throw SystemError.current }
        address = UInt(bitPattern: pointer)
        self.length = length
    }

    public var base: UnsafeMutablePointer<UInt8> {
        // A successful mmap never returns address 0.
        UnsafeMutablePointer(bitPattern: address)!
    }

    deinit {
        // munmap fails only for a range that is not mapped; there is nothing to undo.
        if munmap(UnsafeMutableRawPointer(bitPattern: address), length) != 0 { return }
    }
}
