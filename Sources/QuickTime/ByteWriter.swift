import Media

/// Builds big-endian box bytes in memory.
///
/// Box sizes are written as a placeholder and patched once the body is known
/// (`box(_:_:)`), never computed twice.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(reservingCapacity capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    var count: Int { bytes.count }

    mutating func writeUInt8(_ v: UInt8) { bytes.append(v) }
    mutating func writeUInt16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }
    mutating func writeInt16(_ v: Int16) { writeUInt16(UInt16(bitPattern: v)) }
    mutating func writeUInt24(_ v: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 16))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }
    mutating func writeUInt32(_ v: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 24))
        bytes.append(UInt8(truncatingIfNeeded: v >> 16))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }
    mutating func writeInt32(_ v: Int32) { writeUInt32(UInt32(bitPattern: v)) }
    mutating func writeUInt64(_ v: UInt64) {
        writeUInt32(UInt32(truncatingIfNeeded: v >> 32))
        writeUInt32(UInt32(truncatingIfNeeded: v))
    }
    /// A 16.16 fixed-point number.
    mutating func writeFixed16_16(_ v: Double) { writeInt32(Int32(clamping: Int64((v * 65536).rounded()))) }
    /// An 8.8 fixed-point number (volumes).
    mutating func writeFixed8_8(_ v: Double) { writeInt16(Int16(clamping: Int64((v * 256).rounded()))) }
    mutating func writeFourCC(_ code: FourCC) { writeUInt32(code.bigEndianValue) }
    mutating func writeZeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: n)) }
    mutating func writeBytes<C: Collection>(_ b: C) where C.Element == UInt8 { bytes.append(contentsOf: b) }

    /// A Pascal string: one length byte, then the characters (at most 255).
    mutating func writePascalString(_ s: String) {
        let utf8 = Array(s.utf8.prefix(255))
        writeUInt8(UInt8(utf8.count))
        writeBytes(utf8)
    }

    /// A Pascal string padded with zeros to exactly `width` bytes (the length byte included).
    mutating func writePascalString(_ s: String, paddedTo width: Int) {
        let utf8 = Array(s.utf8.prefix(width - 1))
        writeUInt8(UInt8(utf8.count))
        writeBytes(utf8)
        writeZeros(width - 1 - utf8.count)
    }

    /// The version byte and 24 flag bits of a "full box".
    mutating func writeVersionAndFlags(version: UInt8, flags: UInt32) {
        writeUInt8(version)
        writeUInt24(flags)
    }

    /// Writes a box: a 32-bit size placeholder, the type, the body, then patches the size.
    mutating func box(_ type: FourCC, _ body: (inout ByteWriter) -> Void) {
        let start = bytes.count
        writeUInt32(0)
        writeFourCC(type)
        body(&self)
        patchUInt32(at: start, UInt32(bytes.count - start))
    }

    /// Writes a full box (a box whose body starts with version and flags).
    mutating func fullBox(_ type: FourCC, version: UInt8 = 0, flags: UInt32 = 0, _ body: (inout ByteWriter) -> Void) {
        box(type) { w in
            w.writeVersionAndFlags(version: version, flags: flags)
            body(&w)
        }
    }

    mutating func patchUInt32(at offset: Int, _ v: UInt32) {
        bytes[offset] = UInt8(truncatingIfNeeded: v >> 24)
        bytes[offset + 1] = UInt8(truncatingIfNeeded: v >> 16)
        bytes[offset + 2] = UInt8(truncatingIfNeeded: v >> 8)
        bytes[offset + 3] = UInt8(truncatingIfNeeded: v)
    }
}
