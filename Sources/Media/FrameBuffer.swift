import Synchronization

/// The bytes of one raw frame.
///
/// A buffer is filled by the source that produced the frame and is read-only from the moment
/// the frame is handed on — but for one writer downstream: the agent's pipeline, the frame's
/// only holder after capture, draws the overlay text into it after motion detection has read
/// it and before the encoder does. When the last frame referring to it is gone, the bytes go back to
/// where they came from: a `FramePool` (reused for a later frame), a `release` action (a V4L2
/// source re-queues its mmapped buffer), or the heap.
///
/// `@unchecked Sendable`: the bytes are written only before the frame is shared, then only read.
public final class FrameBuffer: @unchecked Sendable {
    /// First byte of the buffer.
    public let base: UnsafeMutablePointer<UInt8>
    /// Number of bytes.
    public let count: Int
    fileprivate let owner: Owner

    fileprivate enum Owner {
        case heap
        case pool(FramePool)
        case external(@Sendable () -> Void)
    }

    /// `count` bytes of fresh memory (contents undefined), freed when the buffer is released.
    public convenience init(capacity count: Int) {
        self.init(base: FrameBuffer.allocate(count), count: count, owner: .heap)
    }

    /// Bytes that belong to someone else (an mmapped camera buffer): `release` runs exactly
    /// once, on whichever thread drops the last reference, when the buffer is no longer used.
    public convenience init(
        borrowing base: UnsafeMutablePointer<UInt8>, count: Int, release: @escaping @Sendable () -> Void
    ) {
        self.init(base: base, count: count, owner: .external(release))
    }

    fileprivate init(base: UnsafeMutablePointer<UInt8>, count: Int, owner: Owner) {
        self.base = base
        self.count = count
        self.owner = owner
    }

    deinit {
        switch owner {
        case .heap: base.deallocate()
        case .pool(let pool): pool.recycle(base)
        case .external(let release): release()
        }
    }

    /// A writable view of one plane (for the producer filling the buffer).
    public func mutablePlane(_ layout: PlaneLayout) -> MutablePlaneView {
        precondition(layout.offset >= 0 && layout.end <= count, "plane lies outside the frame buffer")
        return MutablePlaneView(
            base: base + layout.offset, width: layout.bytesPerRow, height: layout.rows, stride: layout.stride)
    }

    /// A read-only view of one plane.
    public func plane(_ layout: PlaneLayout) -> PlaneView {
        precondition(layout.offset >= 0 && layout.end <= count, "plane lies outside the frame buffer")
        return PlaneView(
            base: UnsafePointer(base + layout.offset), width: layout.bytesPerRow, height: layout.rows,
            stride: layout.stride)
    }

    fileprivate static func allocate(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        // 64-byte alignment keeps SIMD loads and x264's copies on whole cache lines.
        UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64).bindMemory(
            to: UInt8.self, capacity: max(count, 1))
    }
}

/// Reuses frame buffers of one size, so a running source allocates nothing per frame once
/// the pipeline is full.
///
/// `take()` returns an idle buffer or allocates one; a buffer comes back when its last frame
/// is dropped, on any thread. At most `maximumIdle` idle buffers are kept; beyond that,
/// returned memory is freed (so a burst does not pin memory forever).
public final class FramePool: Sendable {
    public let bufferSize: Int
    public let maximumIdle: Int
    private struct State {
        // Idle buffers, as addresses: plain integers are Sendable, and each one is owned by
        // the pool alone while it is in this list.
        var idle: [UInt]
        var allocated = 0
        var reused = 0
    }
    private let state: Mutex<State>

    public init(bufferSize: Int, maximumIdle: Int = 8) {
        precondition(bufferSize >= 0 && maximumIdle >= 0, "a pool needs a non-negative size")
        self.bufferSize = bufferSize
        self.maximumIdle = maximumIdle
        var list: [UInt] = []
        list.reserveCapacity(maximumIdle)
        self.state = Mutex(State(idle: list))
    }

    deinit {
        // Buffers still in use hold a reference to the pool, so every buffer is idle here.
        state.withLock { state in
            for address in state.idle { UnsafeMutablePointer<UInt8>(bitPattern: address)?.deallocate() }
            state.idle.removeAll()
        }
    }

    /// A buffer of `bufferSize` bytes; its contents are whatever the last frame left there.
    public func take() -> FrameBuffer {
        let address: UInt? = state.withLock { state in
            let address = state.idle.popLast()
            if address == nil { state.allocated += 1 } else { state.reused += 1 }
            return address
        }
        if let address, let base = UnsafeMutablePointer<UInt8>(bitPattern: address) {
            return FrameBuffer(base: base, count: bufferSize, owner: .pool(self))
        }
        return FrameBuffer(base: FrameBuffer.allocate(bufferSize), count: bufferSize, owner: .pool(self))
    }

    /// Buffers allocated so far, and `take()` calls served by reusing one.
    public var statistics: (allocated: Int, reused: Int) { state.withLock { ($0.allocated, $0.reused) } }

    fileprivate func recycle(_ base: UnsafeMutablePointer<UInt8>) {
        let address = UInt(bitPattern: base)
        let kept = state.withLock { state -> Bool in
            guard state.idle.count < maximumIdle else { return false }
            state.idle.append(address)
            return true
        }
        if !kept { base.deallocate() }
    }
}
